# ggml-t2p.cmake - adds the CPU_T2P extra buffer type to a ggml-cpu backend.
#
# Included by ggml/src/ggml-cpu/CMakeLists.txt inside ggml_add_cpu_backend_variant_impl() when
# GGML_CPU_T2P is ON (patches/ggml-t2p.patch; it uses that function's GGML_CPU_NAME and
# GGML_CPU_SOURCES). It builds this crate's static library with cargo once per build tree and links
# it into every CPU variant.
#
# Cache variables (set with -D):
#   GGML_CPU_T2P              ON to use ggml-t2p (the patch includes this file only then)
#   GGML_CPU_T2P_DIR          the ggml-t2p checkout (the patch includes ${GGML_CPU_T2P_DIR}/ggml-glue/ggml-t2p.cmake)
#   GGML_CPU_T2P_RUST_TARGET  Rust target triple(s); empty: automatic (ggml-t2p-target.cmake): the
#                             host for native Linux builds, <arch>-pc-windows-msvc for MSVC and
#                             clang-cl (arch from -A, the compiler or CMAKE_SYSTEM_PROCESSOR),
#                             x86_64-pc-windows-gnu for MinGW-w64 GCC (aarch64: *-gnullvm),
#                             <arch>-apple-darwin per CMAKE_OSX_ARCHITECTURES (two: a universal
#                             library made with lipo), <arch>-unknown-linux-gnu when cross-compiling
#   GGML_CPU_T2P_CARGO        cargo to run (default: $CARGO, else cargo on PATH or in ~/.cargo/bin)
#   GGML_CPU_T2P_CARGO_TARGET_DIR  cargo's target directory (default: <build>/ggml-t2p-cargo); several
#                             build trees may share one (cargo locks it)
#   GGML_CPU_T2P_RUSTC        rustc cargo should use (default: $RUSTC at configure time; empty:
#                             whatever cargo finds). Cross builds need a rustc with the target's
#                             std, e.g. RUSTC=/usr/bin/rustc from Debian's rustc-web.
# On *-windows-msvc the library follows the MSVC runtime of ggml-cpu: /MT adds +crt-static to the
# Rust build (through cargo --config; a RUSTFLAGS variable in the build environment overrides it).

option(GGML_CPU_T2P "ggml: use ggml-t2p kernels for PQ2_0/PTQ1_0 (needs Rust)" OFF)
set(GGML_CPU_T2P_DIR "" CACHE PATH "ggml: path to the ggml-t2p checkout")

get_filename_component(_t2p_dir "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
if (NOT EXISTS "${_t2p_dir}/Cargo.toml")
    message(FATAL_ERROR "ggml-t2p.cmake: ${_t2p_dir} is not a ggml-t2p checkout")
endif()
include("${CMAKE_CURRENT_LIST_DIR}/ggml-t2p-target.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/ggml-t2p-probe.cmake")

if (NOT TARGET ggml_t2p)
    set(GGML_CPU_T2P_RUST_TARGET "" CACHE STRING "ggml-t2p: Rust target triple(s) (empty: automatic)")

    if (DEFINED ENV{CARGO} AND NOT "$ENV{CARGO}" STREQUAL "")
        set(GGML_CPU_T2P_CARGO "$ENV{CARGO}" CACHE FILEPATH "ggml-t2p: cargo executable" FORCE)
    elseif (NOT GGML_CPU_T2P_CARGO)
        find_program(GGML_CPU_T2P_CARGO cargo
            HINTS "$ENV{CARGO_HOME}/bin" "$ENV{HOME}/.cargo/bin" "$ENV{USERPROFILE}/.cargo/bin"
            DOC "ggml-t2p: cargo executable")
    endif()
    if (NOT GGML_CPU_T2P_CARGO)
        message(FATAL_ERROR "GGML_CPU_T2P: cargo not found (install Rust, or set CARGO or GGML_CPU_T2P_CARGO)")
    endif()
    if (DEFINED ENV{RUSTC} AND NOT "$ENV{RUSTC}" STREQUAL "")
        set(GGML_CPU_T2P_RUSTC "$ENV{RUSTC}" CACHE FILEPATH "ggml-t2p: rustc for cargo (empty: cargo's default)" FORCE)
    else()
        set(GGML_CPU_T2P_RUSTC "" CACHE FILEPATH "ggml-t2p: rustc for cargo (empty: cargo's default)")
    endif()

    get_target_property(_t2p_rt ${GGML_CPU_NAME} MSVC_RUNTIME_LIBRARY)
    if (NOT _t2p_rt)
        set(_t2p_rt "${CMAKE_MSVC_RUNTIME_LIBRARY}")
    endif()
    ggml_t2p_rust_target(_t2p MSVC_RUNTIME "${_t2p_rt}")
    if (_t2p_ERROR)
        message(FATAL_ERROR "GGML_CPU_T2P: ${_t2p_ERROR}")
    endif()

    set(GGML_CPU_T2P_CARGO_TARGET_DIR "${CMAKE_BINARY_DIR}/ggml-t2p-cargo" CACHE PATH
        "ggml-t2p: cargo target directory")
    set(_t2p_cargo_dir "${GGML_CPU_T2P_CARGO_TARGET_DIR}")
    set(_t2p_env "CARGO_TARGET_DIR=${_t2p_cargo_dir}")
    if (GGML_CPU_T2P_RUSTC)
        list(APPEND _t2p_env "RUSTC=${GGML_CPU_T2P_RUSTC}")
    endif()
    if (CMAKE_OSX_DEPLOYMENT_TARGET)
        list(APPEND _t2p_env "MACOSX_DEPLOYMENT_TARGET=${CMAKE_OSX_DEPLOYMENT_TARGET}")
    endif()
    set(_t2p_args build --release --lib --no-default-features --manifest-path "${_t2p_dir}/Cargo.toml")

    set(_t2p_commands "")
    set(_t2p_libs "")
    if (NOT _t2p_TRIPLES)
        set(_t2p_lib "${_t2p_cargo_dir}/release/${_t2p_LIB_NAME}")
        list(APPEND _t2p_commands COMMAND "${CMAKE_COMMAND}" -E env ${_t2p_env} "${GGML_CPU_T2P_CARGO}" ${_t2p_args})
    else()
        foreach (_t2p_triple IN LISTS _t2p_TRIPLES)
            set(_t2p_cfg "")
            if (_t2p_RUSTFLAGS)
                string(REPLACE ";" "', '" _t2p_flags "${_t2p_RUSTFLAGS}")
                set(_t2p_cfg --config "target.${_t2p_triple}.rustflags=['${_t2p_flags}']")
            endif()
            list(APPEND _t2p_commands COMMAND "${CMAKE_COMMAND}" -E env ${_t2p_env} "${GGML_CPU_T2P_CARGO}" ${_t2p_args}
                 --target ${_t2p_triple} ${_t2p_cfg})
            list(APPEND _t2p_libs "${_t2p_cargo_dir}/${_t2p_triple}/release/${_t2p_LIB_NAME}")
        endforeach()
        list(LENGTH _t2p_libs _t2p_n)
        if (_t2p_n EQUAL 1)
            set(_t2p_lib "${_t2p_libs}")
        else()
            # An Apple universal build: one library per architecture, joined.
            find_program(GGML_CPU_T2P_LIPO lipo DOC "ggml-t2p: lipo (universal macOS builds)")
            if (NOT GGML_CPU_T2P_LIPO)
                message(FATAL_ERROR "GGML_CPU_T2P: lipo not found for the universal library (${_t2p_TRIPLES})")
            endif()
            set(_t2p_lib "${_t2p_cargo_dir}/universal/${_t2p_LIB_NAME}")
            list(APPEND _t2p_commands
                 COMMAND "${CMAKE_COMMAND}" -E make_directory "${_t2p_cargo_dir}/universal"
                 COMMAND "${GGML_CPU_T2P_LIPO}" -create ${_t2p_libs} -output "${_t2p_lib}")
        endif()
    endif()

    file(GLOB_RECURSE _t2p_deps CONFIGURE_DEPENDS "${_t2p_dir}/src/*.rs")
    list(APPEND _t2p_deps "${_t2p_dir}/Cargo.toml" "${_t2p_dir}/build.rs" "${_t2p_dir}/include/ggml_t2p.h")
    if (EXISTS "${_t2p_dir}/Cargo.lock")
        list(APPEND _t2p_deps "${_t2p_dir}/Cargo.lock")
    endif()

    # cargo leaves an up-to-date library untouched; the touch keeps make from rerunning the command.
    add_custom_command(
        OUTPUT  "${_t2p_lib}"
        ${_t2p_commands}
        COMMAND "${CMAKE_COMMAND}" -E touch "${_t2p_lib}"
        DEPENDS ${_t2p_deps}
        WORKING_DIRECTORY "${_t2p_dir}"
        COMMENT "Building libggml_t2p with cargo (${_t2p_TRIPLES})"
        VERBATIM
        USES_TERMINAL)
    add_custom_target(ggml_t2p_cargo DEPENDS "${_t2p_lib}")

    if (NOT _t2p_TRIPLES OR _t2p_TRIPLES MATCHES "linux-gnu")
        find_package(Threads REQUIRED)
    endif()
    # Headers the shim compiles against, probed once (older forks lack some of them).
    set(_t2p_ggml_dir "${CMAKE_CURRENT_SOURCE_DIR}/..")   # the function runs in ggml/src
    if (NOT EXISTS "${_t2p_ggml_dir}/include/ggml.h" AND EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/../../include/ggml.h")
        set(_t2p_ggml_dir "${CMAKE_CURRENT_SOURCE_DIR}/../..")
    endif()
    ggml_t2p_probe_ggml(_t2p_have "${_t2p_ggml_dir}")

    add_library(ggml_t2p INTERFACE)
    add_dependencies(ggml_t2p ggml_t2p_cargo)
    target_link_libraries(ggml_t2p INTERFACE "${_t2p_lib}" ${_t2p_SYSTEM_LIBS})
    if (_t2p_LINK_OPTIONS)
        target_link_options(ggml_t2p INTERFACE ${_t2p_LINK_OPTIONS})
    endif()
    target_include_directories(ggml_t2p INTERFACE "${_t2p_dir}/include" "${_t2p_dir}/ggml-glue")
    target_compile_definitions(ggml_t2p INTERFACE ${_t2p_have})

    message(STATUS "ggml-t2p: ${_t2p_dir} -> ${_t2p_lib} (${_t2p_have})")
endif()

add_dependencies(${GGML_CPU_NAME} ggml_t2p_cargo)
target_link_libraries(${GGML_CPU_NAME} PRIVATE ggml_t2p)
target_compile_definitions(${GGML_CPU_NAME} PRIVATE GGML_USE_CPU_T2P)
list(APPEND GGML_CPU_SOURCES "${_t2p_dir}/ggml-glue/ggml-t2p-glue.cpp")
