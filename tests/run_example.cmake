# Runs an example program under the Khronos validation layer and checks its outcome (ctest driver,
# cmake -P). Variables:
#   CMD      the command, arguments separated by "|"
#   WORKDIR  a folder to run in (emptied first)
#   CHECK    "loss": the output's "final loss X" must be below its "first loss Y";
#            "finetune": the output must show a fine-tuning run that resumed nothing, a sample,
#            and WORKDIR/out/finetune must hold a complete checkpoint
#            "bench-dp-diloco": `vkgpt bench dp` printed a row of each of its buckets, diloco and
#            stream modes (2 ranks), each with its bytes per step and utilisation
#   VULKAN_RUNS  how many processes must have run with the layer active (at least)
# The layer is forced on for every child through the loader (VK_INSTANCE_LAYERS) with a settings
# file that prints its messages to stdout; any error, warning or performance message fails.
cmake_minimum_required(VERSION 3.20)
foreach(v CMD WORKDIR CHECK VULKAN_RUNS)
    if(NOT DEFINED ${v})
        message(FATAL_ERROR "run_example.cmake: ${v} is not set")
    endif()
endforeach()
string(REPLACE "|" ";" cmd "${CMD}")
file(REMOVE_RECURSE "${WORKDIR}")
file(MAKE_DIRECTORY "${WORKDIR}")
file(WRITE "${WORKDIR}/vk_layer_settings.txt"
     "khronos_validation.debug_action = VK_DBG_LAYER_ACTION_LOG_MSG\n"
     "khronos_validation.report_flags = info,warn,error,perf\n"
     "khronos_validation.enables = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT\n")
set(ENV{VK_INSTANCE_LAYERS} "VK_LAYER_KHRONOS_validation")
set(ENV{VK_LAYER_SETTINGS_PATH} "${WORKDIR}")

execute_process(COMMAND ${cmd} WORKING_DIRECTORY "${WORKDIR}" RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
message("${out}")
if(err)
    message("stderr:\n${err}")
endif()
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the example exited with ${rc}")
endif()

string(REGEX MATCHALL "Validation Layer Active" active "${out}")
list(LENGTH active nactive)
if(nactive LESS VULKAN_RUNS)
    message(FATAL_ERROR "the validation layer was active in ${nactive} process(es), expected at "
                        "least ${VULKAN_RUNS}")
endif()
foreach(bad "Validation Error" "Validation Warning" "Validation Performance Warning")
    string(FIND "${out}" "${bad}" at)
    if(NOT at EQUAL -1)
        message(FATAL_ERROR "the validation layer reported a message (${bad})")
    endif()
endforeach()

if(CHECK STREQUAL "loss")
    if(NOT out MATCHES "first loss ([0-9.]+)")
        message(FATAL_ERROR "no 'first loss' line")
    endif()
    set(first "${CMAKE_MATCH_1}")
    if(NOT out MATCHES "final loss ([0-9.]+)")
        message(FATAL_ERROR "no 'final loss' line")
    endif()
    set(final "${CMAKE_MATCH_1}")
    if(NOT final LESS first)
        message(FATAL_ERROR "the loss did not go down: first ${first}, final ${final}")
    endif()
    message("loss went from ${first} to ${final}")
elseif(CHECK STREQUAL "finetune")
    foreach(want "== 1. prepare" "== 2. base model" "== 3. fine-tune" "== 4. sample"
                 "--- sample ---" "done: fine-tuned model in")
        string(FIND "${out}" "${want}" at)
        if(at EQUAL -1)
            message(FATAL_ERROR "the output lacks '${want}'")
        endif()
    endforeach()
    file(GLOB done "${WORKDIR}/out/finetune/step_*/DONE")
    file(GLOB shards "${WORKDIR}/out/data/train_*.bin")
    if(NOT done OR NOT shards)
        message(FATAL_ERROR "no shard or no complete fine-tuning checkpoint under ${WORKDIR}/out")
    endif()
elseif(CHECK STREQUAL "bench-dp-diloco")
    foreach(mode buckets diloco stream)
        if(NOT out MATCHES "\n +2 +${mode} +[0-9.]+ [^\n]* [0-9.]+ +[0-9.]+%\n")
            message(FATAL_ERROR "no row of mode ${mode} ending in its MiB/step and util")
        endif()
    endforeach()
else()
    message(FATAL_ERROR "unknown CHECK '${CHECK}'")
endif()
