/* Linux-only: what macOS builds must not include (tests/CMakeLists.txt, src_posix_strict). */
#error "sys/sendfile.h is Linux-only"
