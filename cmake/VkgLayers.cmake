# The layer picture of DESIGN.md section 1, enforced by the compiler. Each layer's sources see,
# as their only include path, a "view": a folder in the build tree holding symbolic links to the
# src/ folders of that layer and the layers below it, and to the public headers (include/vkgpt/)
# those layers may use. A file that includes a header of a layer above its own (ops including
# "model/model.h", the transport including "vkgpt/device.h") fails to compile: the header is not
# in its view. Tests, the command-line tool, examples and fuzz targets see the whole tree.
#
# The views, lowest first (each includes the ones it names):
#   os         os/ (the platform layer: the operating system's headers, nothing of the project)
#   base       os, base/                     status.h
#   ref        ref/                          (libc only)
#   transport  base                          comm.h
#   vk         base, vk/                     device.h
#   ops        vk, ops/                      tuning.h
#   io         base, io/                     io.h, model.h (the model file's configuration)
#   data       io, data/                     data.h, tokenizer.h
#   model      ops, io, model/               model.h
#   optim      ops, optim/                   optim.h
#   parallel   model, optim, data, transport, parallel/  timeline.h, parallel.h
#   train      parallel, train/              train.h

set(VKG_LAYERS_DIR ${PROJECT_BINARY_DIR}/layers)

# vkg_layer_view(NAME DIRS d... HEADERS h... [BELOW view...]): create the view NAME.
function(vkg_layer_view name)
    cmake_parse_arguments(L "" "" "DIRS;HEADERS;BELOW" ${ARGN})
    set(dirs ${L_DIRS})
    set(headers ${L_HEADERS})
    foreach(b ${L_BELOW})
        list(APPEND dirs ${VKG_LAYER_${b}_DIRS})
        list(APPEND headers ${VKG_LAYER_${b}_HEADERS})
    endforeach()
    list(REMOVE_DUPLICATES dirs)
    list(REMOVE_DUPLICATES headers)
    set(root ${VKG_LAYERS_DIR}/${name})
    file(REMOVE_RECURSE ${root})
    file(MAKE_DIRECTORY ${root}/vkgpt)
    foreach(d ${dirs})
        file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${d} ${root}/${d} SYMBOLIC)
    endforeach()
    foreach(h ${headers})
        file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/vkgpt/${h} ${root}/vkgpt/${h} SYMBOLIC)
    endforeach()
    set(VKG_LAYER_${name}_DIRS ${dirs} PARENT_SCOPE)
    set(VKG_LAYER_${name}_HEADERS ${headers} PARENT_SCOPE)
endfunction()

vkg_layer_view(os DIRS os)
vkg_layer_view(base DIRS base HEADERS status.h BELOW os)
vkg_layer_view(ref DIRS ref)
vkg_layer_view(transport HEADERS comm.h BELOW base)
vkg_layer_view(vk DIRS vk HEADERS device.h BELOW base)
vkg_layer_view(ops DIRS ops HEADERS tuning.h BELOW vk)
vkg_layer_view(io DIRS io HEADERS io.h model.h BELOW base)
vkg_layer_view(data DIRS data HEADERS data.h tokenizer.h BELOW io)
vkg_layer_view(model DIRS model HEADERS model.h BELOW ops io)
vkg_layer_view(optim DIRS optim HEADERS optim.h BELOW ops)
vkg_layer_view(parallel DIRS parallel HEADERS timeline.h parallel.h BELOW model optim data transport)
vkg_layer_view(train DIRS train HEADERS train.h BELOW parallel)

# vkg_layer_sources(VIEW TARGET tgt FILES f...): compile files (of target tgt) against VIEW only.
function(vkg_layer_sources view)
    cmake_parse_arguments(L "" "TARGET" "FILES" ${ARGN})
    set_source_files_properties(${L_FILES} TARGET_DIRECTORY ${L_TARGET}
                                PROPERTIES INCLUDE_DIRECTORIES ${VKG_LAYERS_DIR}/${view})
endfunction()

# vkg_layer_library(NAME VIEW view SOURCES f... [DEPS lib...] [PRIVATE_DEPS lib...]): one
# layer's static library. Its sources compile against the layer's view alone (a private include
# path, so nothing it includes leaks to others) and it links PUBLIC to the libraries of the
# layers it stands on, as DESIGN.md's arrows say; what a layer uses privately (a system library)
# stays PRIVATE.
function(vkg_layer_library name)
    cmake_parse_arguments(L "" "VIEW" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
    add_library(${name} STATIC ${L_SOURCES})
    target_include_directories(${name} PRIVATE ${VKG_LAYERS_DIR}/${L_VIEW})
    target_link_libraries(${name} PUBLIC ${L_DEPS} PRIVATE ${L_PRIVATE_DEPS})
endfunction()

# vkg_whole_tree(tgt): tgt (a test, the CLI, a fuzz target) sees every header.
function(vkg_whole_tree tgt)
    target_include_directories(${tgt} PRIVATE ${PROJECT_SOURCE_DIR}/include
                                              ${PROJECT_SOURCE_DIR}/src)
endfunction()
