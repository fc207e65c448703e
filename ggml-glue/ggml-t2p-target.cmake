# ggml-t2p-target.cmake - which Rust target(s) libggml_t2p is built for and what linking it needs,
# derived from the CMake toolchain state. Pure logic (no targets, no commands), so that
# ggml-glue/cmake-tests can run it under mock toolchains for Windows, macOS, Android and Linux.
#
#   ggml_t2p_rust_target(<prefix> [MSVC_RUNTIME <value of the MSVC_RUNTIME_LIBRARY property>])
#
# reads GGML_CPU_T2P_RUST_TARGET (an explicit triple, or two for an Apple universal library; wins
# over everything below), CMAKE_SYSTEM_NAME, CMAKE_SYSTEM_PROCESSOR, CMAKE_CROSSCOMPILING,
# CMAKE_GENERATOR_PLATFORM (Visual Studio -A), CMAKE_CXX_COMPILER_ARCHITECTURE_ID (MSVC and
# clang-cl), CMAKE_OSX_ARCHITECTURES, CMAKE_ANDROID_ARCH_ABI, MSVC, MINGW, CMAKE_CXX_SIMULATE_ID,
# CMAKE_CXX_COMPILER_TARGET, and sets in the caller's scope:
#
#   <prefix>_TRIPLES       Rust target triples (empty: cargo's host, used for native Linux builds;
#                          two for an Apple universal build, to be joined with lipo)
#   <prefix>_LIB_NAME      file cargo writes per triple: ggml_t2p.lib (*-windows-msvc) or
#                          libggml_t2p.a
#   <prefix>_SYSTEM_LIBS   system libraries a Rust staticlib needs there
#   <prefix>_RUSTFLAGS     extra rustc flags (+crt-static for a static MSVC runtime)
#   <prefix>_LINK_OPTIONS  extra link options (a debug MSVC runtime: drop Rust's release CRT)
#   <prefix>_ERROR         empty, or why this toolchain cannot get the library

cmake_policy(PUSH)
cmake_policy(SET CMP0054 NEW)   # quoted "MSVC" is a string, also when included from a script

function(_ggml_t2p_arch out value)
    string(TOLOWER "${value}" v)
    if (v MATCHES "^(aarch64|arm64|armv8.*|arm64-v8a)$")
        set(${out} aarch64 PARENT_SCOPE)
    elseif (v MATCHES "^(x86_64|amd64|x64|em64t)$")
        set(${out} x86_64 PARENT_SCOPE)
    elseif (v MATCHES "^(i[3-6]86|x86|win32)$")
        set(${out} i686 PARENT_SCOPE)
    else()
        set(${out} "" PARENT_SCOPE)
    endif()
endfunction()

function(ggml_t2p_rust_target prefix)
    cmake_parse_arguments(ARG "" "MSVC_RUNTIME" "" ${ARGN})
    set(triples "")
    set(lib_name libggml_t2p.a)
    set(libs "")
    set(rustflags "")
    set(link_options "")
    set(error "")

    # Windows ABI: MSVC and clang-cl (and clang --target=*-windows-msvc) use the MSVC ABI; MinGW GNU.
    set(win_abi "")
    if (CMAKE_SYSTEM_NAME STREQUAL "Windows")
        if (MSVC OR CMAKE_CXX_SIMULATE_ID STREQUAL "MSVC" OR CMAKE_C_SIMULATE_ID STREQUAL "MSVC"
            OR CMAKE_CXX_COMPILER_TARGET MATCHES "windows-msvc")
            set(win_abi msvc)
        elseif (MINGW OR CMAKE_CXX_COMPILER_ID STREQUAL "GNU" OR CMAKE_CXX_COMPILER_TARGET MATCHES "windows-gnu|mingw")
            set(win_abi gnu)
        else()
            set(win_abi msvc)
        endif()
    endif()

    # The target architecture. Visual Studio's -A names it (the host's CMAKE_SYSTEM_PROCESSOR is
    # then the build machine's); MSVC and clang-cl report it as the compiler architecture.
    set(arch "")
    if (CMAKE_GENERATOR_PLATFORM)
        _ggml_t2p_arch(arch "${CMAKE_GENERATOR_PLATFORM}")
        if (NOT arch)
            set(error "Visual Studio platform '${CMAKE_GENERATOR_PLATFORM}' has no Rust target here (use x64 or ARM64)")
        endif()
    endif()
    if (NOT arch AND NOT error AND win_abi STREQUAL "msvc" AND CMAKE_CXX_COMPILER_ARCHITECTURE_ID)
        _ggml_t2p_arch(arch "${CMAKE_CXX_COMPILER_ARCHITECTURE_ID}")
    endif()
    if (NOT arch AND NOT error AND CMAKE_SYSTEM_NAME STREQUAL "Android" AND CMAKE_ANDROID_ARCH_ABI)
        _ggml_t2p_arch(arch "${CMAKE_ANDROID_ARCH_ABI}")
    endif()
    if (NOT arch AND NOT error)
        _ggml_t2p_arch(arch "${CMAKE_SYSTEM_PROCESSOR}")
    endif()

    if (GGML_CPU_T2P_RUST_TARGET)
        set(triples ${GGML_CPU_T2P_RUST_TARGET})
    elseif (error)
    elseif (CMAKE_SYSTEM_NAME STREQUAL "Windows")
        if (NOT arch)
            set(error "no Rust target for Windows on '${CMAKE_SYSTEM_PROCESSOR}'; set GGML_CPU_T2P_RUST_TARGET")
        elseif (win_abi STREQUAL "msvc")
            set(triples ${arch}-pc-windows-msvc)
        elseif (arch STREQUAL "aarch64")
            set(triples aarch64-pc-windows-gnullvm)
        else()
            set(triples ${arch}-pc-windows-gnu)
        endif()
    elseif (CMAKE_SYSTEM_NAME STREQUAL "Darwin")
        # One library per architecture in CMAKE_OSX_ARCHITECTURES (two: a universal library),
        # else the architecture CMake reports for this machine.
        set(osx_archs ${CMAKE_OSX_ARCHITECTURES})
        if (NOT osx_archs)
            set(osx_archs ${CMAKE_SYSTEM_PROCESSOR})
        endif()
        foreach (a IN LISTS osx_archs)
            _ggml_t2p_arch(ra "${a}")
            if (ra STREQUAL "aarch64" OR ra STREQUAL "x86_64")
                list(APPEND triples ${ra}-apple-darwin)
            else()
                set(error "no Rust target for macOS architecture '${a}' (arm64 and x86_64 are supported)")
            endif()
        endforeach()
        list(REMOVE_DUPLICATES triples)
    elseif (CMAKE_SYSTEM_NAME STREQUAL "iOS")
        set(triples aarch64-apple-ios)
    elseif (CMAKE_SYSTEM_NAME STREQUAL "Android")
        if (arch)
            set(triples ${arch}-linux-android)
        else()
            set(error "no Rust target for Android ABI '${CMAKE_ANDROID_ARCH_ABI}'; set GGML_CPU_T2P_RUST_TARGET")
        endif()
    elseif (CMAKE_CROSSCOMPILING)
        if (CMAKE_SYSTEM_NAME STREQUAL "Linux" AND arch)
            set(triples ${arch}-unknown-linux-gnu)
        else()
            set(error "cross-compiling for ${CMAKE_SYSTEM_NAME}/${CMAKE_SYSTEM_PROCESSOR}: set GGML_CPU_T2P_RUST_TARGET")
        endif()
    endif()
    # Native builds elsewhere (Linux, the BSDs): no --target, cargo builds for its host.

    set(first "")
    if (triples)
        list(GET triples 0 first)
    endif()
    if (first MATCHES "windows-msvc")
        set(lib_name ggml_t2p.lib)
        # rustc --print native-static-libs: Rust 1.96 (aarch64-pc-windows-msvc) lists kernel32 ntdll
        # userenv ws2_32 dbghelp; older releases also advapi32, bcrypt and synchronization. The
        # union, so that any supported Rust (1.89+) links; all are import libraries of the SDK.
        set(libs kernel32 advapi32 bcrypt ntdll userenv ws2_32 dbghelp synchronization)
        # The CRT. Rust's *-windows-msvc code asks for the release CRT: msvcrt (/MD) by default,
        # libcmt (/MT) with +crt-static. Match the runtime of the library we link into; for a debug
        # runtime (/MDd, /MTd), drop Rust's release CRT so that one CRT is linked.
        set(rt "${ARG_MSVC_RUNTIME}")
        if (NOT rt)
            set(rt "MultiThreaded$<$<CONFIG:Debug>:Debug>DLL")   # CMake's default (CMP0091)
        endif()
        if (rt MATCHES "DLL")
            set(rust_crt msvcrt.lib)
        else()
            set(rust_crt libcmt.lib)
            list(APPEND rustflags "-Ctarget-feature=+crt-static")
        endif()
        if (rt MATCHES "^MultiThreaded(DLL)?$")
        elseif (rt MATCHES "^MultiThreadedDebug(DLL)?$")
            list(APPEND link_options "LINKER:/NODEFAULTLIB:${rust_crt}")
        elseif (rt MATCHES "Debug")
            list(APPEND link_options "$<$<CONFIG:Debug>:LINKER:/NODEFAULTLIB:${rust_crt}>")
        endif()
    elseif (first MATCHES "windows-gnu")
        # MinGW: rustc 1.95 --print native-static-libs for x86_64-pc-windows-gnu lists kernel32
        # ntdll userenv ws2_32 dbghelp (tools/windows-test.py checks that this list covers it and
        # links and runs a program with it under Wine); the rest as for MSVC, for older Rust. All
        # are import libraries of MinGW-w64. Rust's std also imports ProcessPrng from
        # bcryptprimitives.dll itself (raw-dylib, no import library): the programs need Windows 10
        # or later (or Wine 9 or later).
        set(libs kernel32 advapi32 bcrypt ntdll userenv ws2_32 dbghelp synchronization)
    elseif (first MATCHES "apple")
        # rustc --print native-static-libs for aarch64-apple-darwin lists -lSystem -lc -lm (and
        # -liconv): the C++ driver links libSystem anyway. No framework is needed.
        set(libs "")
    elseif (first MATCHES "android")
        set(libs dl m)
    else()
        set(libs Threads::Threads ${CMAKE_DL_LIBS} m)
    endif()

    set(${prefix}_TRIPLES "${triples}" PARENT_SCOPE)
    set(${prefix}_LIB_NAME "${lib_name}" PARENT_SCOPE)
    set(${prefix}_SYSTEM_LIBS "${libs}" PARENT_SCOPE)
    set(${prefix}_RUSTFLAGS "${rustflags}" PARENT_SCOPE)
    set(${prefix}_LINK_OPTIONS "${link_options}" PARENT_SCOPE)
    set(${prefix}_ERROR "${error}" PARENT_SCOPE)
endfunction()

cmake_policy(POP)
