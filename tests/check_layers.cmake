# ctest layers_refuse_upward_includes: the layer views of cmake/VkgLayers.cmake do what they are
# for. Each case compiles one probe file (tests/layers/) with -fsyntax-only against one view and
# checks the outcome: an upward include must fail, naming the missing header, and the same probe
# must compile against a view that is allowed to see it (so the failure is the view's doing).
# Run with -DCC=compiler -DVIEWS=build/layers -DSRC=source dir -DGEN=generated include dir
# [-DSYSINC=folder of Vulkan's and volk's headers, where the compiler does not look by itself].
set(sysinc "")
if(SYSINC)
    set(sysinc -I${SYSINC})
endif()
function(probe file view expect_ok needle)
    execute_process(COMMAND ${CC} -std=c11 -fsyntax-only -I${VIEWS}/${view} -I${GEN} ${sysinc}
                            ${SRC}/tests/layers/${file}
                    RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
    if(expect_ok AND NOT rc EQUAL 0)
        message(FATAL_ERROR "${file} against the ${view} view should compile:\n${err}")
    endif()
    if(NOT expect_ok)
        if(rc EQUAL 0)
            message(FATAL_ERROR "${file} compiled against the ${view} view: the layers are open")
        endif()
        string(FIND "${err}" "${needle}" at)
        if(at EQUAL -1)
            message(FATAL_ERROR "${file} against the ${view} view failed without naming "
                                "${needle}:\n${err}")
        endif()
        message(STATUS "refused as it should be: ${file} against the ${view} view: ${needle}")
    endif()
endfunction()

probe(ops_includes_model.c ops FALSE "model/model.h")
probe(ops_includes_model.c model TRUE "")
probe(transport_includes_vulkan.c transport FALSE "vkgpt/device.h")
probe(transport_includes_vulkan.c vk TRUE "")
probe(model_includes_optim.c model FALSE "optim/adamw.h")
probe(model_includes_optim.c parallel TRUE "")
probe(parallel_includes_train.c parallel FALSE "train/trainer_internal.h")
probe(parallel_includes_train.c train TRUE "")
probe(optim_includes_model.c optim FALSE "model/model.h")
probe(optim_includes_model.c parallel TRUE "")
probe(vk_includes_tuning.c vk FALSE "ops/tuning.h")
probe(vk_includes_tuning.c ops TRUE "")
