# ggml-t2p-probe.cmake - what the host ggml offers that the shim and the ggml-level test use but
# older trees lack. Reads headers only (no try_compile, so it works the same when cross-compiling).
#
#   ggml_t2p_probe_ggml(<out_var> <ggml dir>)
#
# <ggml dir> is the directory holding include/ggml.h and src/ (llama.cpp's ggml/, or an upstream
# ggml checkout). <out_var> gets compile definitions, each 0 or 1:
#   GGML_T2P_HAVE_HADAMARD_HINT  ggml.h has GGML_HINT_SRC0_IS_HADAMARD (and ggml_mul_mat_set_hint)
#   GGML_T2P_HAVE_TENSOR_2D      ggml-backend-impl.h's buffer interface has set_tensor_2d/get_tensor_2d
#   GGML_T2P_HAVE_CHUNK_API      ggml-cpu-impl.h has ggml_threadpool_chunk_set/add
# A header that is not found counts as "has it" (the shim's defaults are the newest ggml). A cache
# variable GGML_CPU_T2P_HAVE_<name> (0 or 1) overrides a probe, e.g. -DGGML_CPU_T2P_HAVE_CHUNK_API=0.

function(ggml_t2p_probe_ggml out ggml_dir)
    set(defs "")
    foreach (probe
             "HADAMARD_HINT|include/ggml.h|GGML_HINT_SRC0_IS_HADAMARD"
             "TENSOR_2D|src/ggml-backend-impl.h|set_tensor_2d"
             "CHUNK_API|src/ggml-cpu/ggml-cpu-impl.h|ggml_threadpool_chunk_set")
        string(REPLACE "|" ";" p "${probe}")
        list(GET p 0 name)
        list(GET p 1 file)
        list(GET p 2 needle)
        set(have 1)
        if (EXISTS "${ggml_dir}/${file}")
            file(STRINGS "${ggml_dir}/${file}" hits REGEX "${needle}")
            if (NOT hits)
                set(have 0)
            endif()
        endif()
        if (DEFINED GGML_CPU_T2P_HAVE_${name} AND NOT "${GGML_CPU_T2P_HAVE_${name}}" STREQUAL "")
            if (GGML_CPU_T2P_HAVE_${name})
                set(have 1)
            else()
                set(have 0)
            endif()
        endif()
        list(APPEND defs GGML_T2P_HAVE_${name}=${have})
    endforeach()
    set(${out} "${defs}" PARENT_SCOPE)
endfunction()
