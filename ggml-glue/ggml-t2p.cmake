# ggml-t2p.cmake - adds the CPU_T2P extra buffer type to a ggml-cpu backend.
#
# Included by ggml/src/ggml-cpu/CMakeLists.txt inside ggml_add_cpu_backend_variant_impl() when
# GGML_CPU_T2P is ON (it uses that function's GGML_CPU_NAME and GGML_CPU_SOURCES). It builds this
# crate's static library with cargo once per build tree and links it into every CPU variant.
#
# Cache variables:
#   GGML_CPU_T2P_DIR          the ggml-t2p checkout (defined by ggml/CMakeLists.txt)
#   GGML_CPU_T2P_RUST_TARGET  Rust target triple; empty: the host, or aarch64-unknown-linux-gnu when
#                             cross-compiling for aarch64
#   GGML_CPU_T2P_CARGO        cargo to run (default: $CARGO, else cargo on PATH or ~/.cargo/bin)
#   GGML_CPU_T2P_RUSTC        rustc cargo should use (default: $RUSTC at configure time; empty:
#                             whatever cargo finds). Cross builds need a rustc with the target's
#                             std, e.g. RUSTC=/usr/bin/rustc from Debian's rustc-web.

if (NOT GGML_CPU_T2P_DIR OR NOT EXISTS "${GGML_CPU_T2P_DIR}/Cargo.toml")
    message(FATAL_ERROR "GGML_CPU_T2P is ON but GGML_CPU_T2P_DIR ('${GGML_CPU_T2P_DIR}') is not a ggml-t2p checkout")
endif()
get_filename_component(_t2p_dir "${GGML_CPU_T2P_DIR}" ABSOLUTE)

if (NOT TARGET ggml_t2p)
    set(GGML_CPU_T2P_RUST_TARGET "" CACHE STRING "ggml-t2p: Rust target triple (empty: automatic)")

    if (DEFINED ENV{CARGO} AND NOT "$ENV{CARGO}" STREQUAL "")
        set(GGML_CPU_T2P_CARGO "$ENV{CARGO}" CACHE FILEPATH "ggml-t2p: cargo executable" FORCE)
    elseif (NOT GGML_CPU_T2P_CARGO)
        find_program(GGML_CPU_T2P_CARGO cargo HINTS "$ENV{HOME}/.cargo/bin" DOC "ggml-t2p: cargo executable")
    endif()
    if (NOT GGML_CPU_T2P_CARGO)
        message(FATAL_ERROR "GGML_CPU_T2P: cargo not found (install Rust, or set CARGO or GGML_CPU_T2P_CARGO)")
    endif()
    if (DEFINED ENV{RUSTC} AND NOT "$ENV{RUSTC}" STREQUAL "")
        set(GGML_CPU_T2P_RUSTC "$ENV{RUSTC}" CACHE FILEPATH "ggml-t2p: rustc for cargo (empty: cargo's default)" FORCE)
    else()
        set(GGML_CPU_T2P_RUSTC "" CACHE FILEPATH "ggml-t2p: rustc for cargo (empty: cargo's default)")
    endif()

    set(_t2p_triple "${GGML_CPU_T2P_RUST_TARGET}")
    if (NOT _t2p_triple AND CMAKE_CROSSCOMPILING AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
        set(_t2p_triple aarch64-unknown-linux-gnu)
    endif()

    set(_t2p_cargo_dir "${CMAKE_BINARY_DIR}/ggml-t2p-cargo")
    set(_t2p_args build --release --lib --no-default-features --manifest-path "${_t2p_dir}/Cargo.toml")
    if (_t2p_triple)
        list(APPEND _t2p_args --target ${_t2p_triple})
        set(_t2p_lib "${_t2p_cargo_dir}/${_t2p_triple}/release/${CMAKE_STATIC_LIBRARY_PREFIX}ggml_t2p${CMAKE_STATIC_LIBRARY_SUFFIX}")
    else()
        set(_t2p_lib "${_t2p_cargo_dir}/release/${CMAKE_STATIC_LIBRARY_PREFIX}ggml_t2p${CMAKE_STATIC_LIBRARY_SUFFIX}")
    endif()
    set(_t2p_env "CARGO_TARGET_DIR=${_t2p_cargo_dir}")
    if (GGML_CPU_T2P_RUSTC)
        list(APPEND _t2p_env "RUSTC=${GGML_CPU_T2P_RUSTC}")
    endif()

    file(GLOB_RECURSE _t2p_deps CONFIGURE_DEPENDS "${_t2p_dir}/src/*.rs")
    list(APPEND _t2p_deps "${_t2p_dir}/Cargo.toml" "${_t2p_dir}/build.rs" "${_t2p_dir}/include/ggml_t2p.h")
    if (EXISTS "${_t2p_dir}/Cargo.lock")
        list(APPEND _t2p_deps "${_t2p_dir}/Cargo.lock")
    endif()

    # cargo leaves an up-to-date library untouched; the touch keeps make from rerunning the command.
    add_custom_command(
        OUTPUT  "${_t2p_lib}"
        COMMAND "${CMAKE_COMMAND}" -E env ${_t2p_env} "${GGML_CPU_T2P_CARGO}" ${_t2p_args}
        COMMAND "${CMAKE_COMMAND}" -E touch "${_t2p_lib}"
        DEPENDS ${_t2p_deps}
        WORKING_DIRECTORY "${_t2p_dir}"
        COMMENT "Building libggml_t2p with cargo"
        VERBATIM
        USES_TERMINAL)
    add_custom_target(ggml_t2p_cargo DEPENDS "${_t2p_lib}")

    find_package(Threads REQUIRED)
    add_library(ggml_t2p INTERFACE)
    add_dependencies(ggml_t2p ggml_t2p_cargo)
    target_link_libraries(ggml_t2p INTERFACE "${_t2p_lib}" Threads::Threads ${CMAKE_DL_LIBS} m)
    target_include_directories(ggml_t2p INTERFACE "${_t2p_dir}/include" "${_t2p_dir}/ggml-glue")

    message(STATUS "ggml-t2p: ${_t2p_dir} -> ${_t2p_lib}")
endif()

add_dependencies(${GGML_CPU_NAME} ggml_t2p_cargo)
target_link_libraries(${GGML_CPU_NAME} PRIVATE ggml_t2p)
target_compile_definitions(${GGML_CPU_NAME} PRIVATE GGML_USE_CPU_T2P)
list(APPEND GGML_CPU_SOURCES "${_t2p_dir}/ggml-glue/ggml-t2p-glue.cpp")
