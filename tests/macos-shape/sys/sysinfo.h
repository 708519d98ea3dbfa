/* Linux-only: what macOS builds must not include (tests/CMakeLists.txt, src_posix_strict). */
#error "sys/sysinfo.h is Linux-only"
