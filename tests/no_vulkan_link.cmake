# No binary links the Vulkan loader (volk opens it at run time): the ELF files named in FILES (a
# ;-separated list) need no libvulkan, as `readelf -d` (READELF) shows.
#   cmake -DREADELF=readelf -DFILES="a;b" -P tests/no_vulkan_link.cmake
foreach(f ${FILES})
    execute_process(COMMAND ${READELF} -d ${f} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                    ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "readelf -d ${f} failed: ${err}")
    endif()
    if(NOT out MATCHES "NEEDED")
        message(FATAL_ERROR "readelf -d ${f} shows no needed library at all:\n${out}")
    endif()
    if(out MATCHES "libvulkan")
        message(FATAL_ERROR "${f} links the Vulkan loader:\n${out}")
    endif()
endforeach()
