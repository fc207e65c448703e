# cmake -P ggml-glue/cmake-tests/test-target.cmake
#
# Runs ggml_t2p_rust_target (ggml-glue/ggml-t2p-target.cmake) on the CMake variables that Windows
# (MSVC, clang-cl, Visual Studio -A, MinGW), macOS (one or two architectures), Android and Linux
# toolchains set, and checks the Rust target, library name, system libraries and flags it derives.
# No compiler is involved: mock-toolchain.cmake does the same through a real configure.

cmake_minimum_required(VERSION 3.16)
include("${CMAKE_CURRENT_LIST_DIR}/../ggml-t2p-target.cmake")

set(_failures 0)
set(_cases 0)

# case(<name> VAR=value ... EXPECT key=value ...): keys TRIPLES, LIB, LIBS, RUSTFLAGS, LINK, ERROR
# (ERROR matches as a regex, the others exactly; lists with ',' for ';').
function(case name)
    set(vars "")
    set(expect "")
    set(mode vars)
    foreach (a IN LISTS ARGN)
        if (a STREQUAL "EXPECT")
            set(mode expect)
        else()
            list(APPEND ${mode} "${a}")
        endif()
    endforeach()
    # A clean slate: nothing from an earlier case leaks in.
    foreach (v CMAKE_SYSTEM_NAME CMAKE_SYSTEM_PROCESSOR CMAKE_CROSSCOMPILING CMAKE_GENERATOR_PLATFORM
               CMAKE_CXX_COMPILER_ARCHITECTURE_ID CMAKE_OSX_ARCHITECTURES CMAKE_ANDROID_ARCH_ABI MSVC MINGW
               CMAKE_CXX_SIMULATE_ID CMAKE_C_SIMULATE_ID CMAKE_CXX_COMPILER_ID CMAKE_CXX_COMPILER_TARGET
               GGML_CPU_T2P_RUST_TARGET CMAKE_DL_LIBS RUNTIME)
        unset(${v})
    endforeach()
    foreach (kv IN LISTS vars)
        string(FIND "${kv}" "=" eq)
        string(SUBSTRING "${kv}" 0 ${eq} k)
        math(EXPR eq "${eq} + 1")
        string(SUBSTRING "${kv}" ${eq} -1 v)
        string(REPLACE "," ";" v "${v}")
        set(${k} "${v}")
    endforeach()
    ggml_t2p_rust_target(r MSVC_RUNTIME "${RUNTIME}")
    set(got_TRIPLES "${r_TRIPLES}")
    set(got_LIB "${r_LIB_NAME}")
    set(got_LIBS "${r_SYSTEM_LIBS}")
    set(got_RUSTFLAGS "${r_RUSTFLAGS}")
    set(got_LINK "${r_LINK_OPTIONS}")
    set(got_ERROR "${r_ERROR}")
    set(bad "")
    foreach (kv IN LISTS expect)
        string(FIND "${kv}" "=" eq)
        string(SUBSTRING "${kv}" 0 ${eq} k)
        math(EXPR eq "${eq} + 1")
        string(SUBSTRING "${kv}" ${eq} -1 v)
        string(REPLACE "," ";" v "${v}")
        if (k STREQUAL "ERROR")
            if (NOT got_ERROR MATCHES "${v}")
                string(APPEND bad " ERROR='${got_ERROR}' (want /${v}/)")
            endif()
        elseif (NOT "${got_${k}}" STREQUAL "${v}")
            string(APPEND bad " ${k}='${got_${k}}' (want '${v}')")
        endif()
    endforeach()
    math(EXPR n "${_cases} + 1")
    set(_cases ${n} PARENT_SCOPE)
    if (bad)
        message("FAIL ${name}:${bad}")
        math(EXPR f "${_failures} + 1")
        set(_failures ${f} PARENT_SCOPE)
    else()
        message("ok   ${name}: ${got_TRIPLES} ${got_LIB} [${got_LIBS}] ${got_RUSTFLAGS} ${got_LINK}")
    endif()
endfunction()

set(WINLIBS "kernel32,advapi32,bcrypt,ntdll,userenv,ws2_32,dbghelp,synchronization")

# Windows on ARM, MSVC (native ARM64 host: CMake reports ARM64 for the system and the compiler).
case("msvc arm64 native" CMAKE_SYSTEM_NAME=Windows CMAKE_SYSTEM_PROCESSOR=ARM64 MSVC=1
     CMAKE_CXX_COMPILER_ARCHITECTURE_ID=ARM64
     EXPECT TRIPLES=aarch64-pc-windows-msvc LIB=ggml_t2p.lib LIBS=${WINLIBS} RUSTFLAGS=)
# Visual Studio -A ARM64 on an x64 machine: the system processor is the host's.
case("vs -A ARM64 on x64" CMAKE_SYSTEM_NAME=Windows CMAKE_SYSTEM_PROCESSOR=AMD64 MSVC=1
     CMAKE_GENERATOR_PLATFORM=ARM64 CMAKE_CXX_COMPILER_ARCHITECTURE_ID=ARM64
     EXPECT TRIPLES=aarch64-pc-windows-msvc LIB=ggml_t2p.lib)
case("vs -A x64" CMAKE_SYSTEM_NAME=Windows CMAKE_SYSTEM_PROCESSOR=AMD64 MSVC=1 CMAKE_GENERATOR_PLATFORM=x64
     EXPECT TRIPLES=x86_64-pc-windows-msvc LIB=ggml_t2p.lib)
case("vs -A ARM64EC" CMAKE_SYSTEM_NAME=Windows CMAKE_SYSTEM_PROCESSOR=AMD64 MSVC=1 CMAKE_GENERATOR_PLATFORM=ARM64EC
     EXPECT ERROR=ARM64EC)
# clang-cl (MSVC=1, compiler id Clang simulating MSVC), Ninja, ARM64 via the compiler architecture.
case("clang-cl arm64" CMAKE_SYSTEM_NAME=Windows CMAKE_SYSTEM_PROCESSOR=ARM64 MSVC=1 CMAKE_CXX_COMPILER_ID=Clang
     CMAKE_CXX_SIMULATE_ID=MSVC CMAKE_CXX_COMPILER_ARCHITECTURE_ID=ARM64
     EXPECT TRIPLES=aarch64-pc-windows-msvc LIB=ggml_t2p.lib LIBS=${WINLIBS})
# clang (GNU driver) targeting *-windows-msvc: MSVC is not set, the simulate id is.
case("clang gnu-driver msvc x64" CMAKE_SYSTEM_NAME=Windows CMAKE_SYSTEM_PROCESSOR=AMD64 CMAKE_CXX_COMPILER_ID=Clang
     CMAKE_CXX_SIMULATE_ID=MSVC
     EXPECT TRIPLES=x86_64-pc-windows-msvc LIB=ggml_t2p.lib)
# MSVC runtimes: /MT -> +crt-static; debug runtimes drop Rust's release CRT (in Debug only for the default).
case("msvc default runtime" CMAKE_SYSTEM_NAME=Windows CMAKE_SYSTEM_PROCESSOR=ARM64 MSVC=1
     EXPECT RUSTFLAGS= LINK=$<$<CONFIG:Debug>:LINKER:/NODEFAULTLIB:msvcrt.lib>)
case("msvc /MD" CMAKE_SYSTEM_NAME=Windows CMAKE_SYSTEM_PROCESSOR=ARM64 MSVC=1 RUNTIME=MultiThreadedDLL
     EXPECT RUSTFLAGS= LINK=)
case("msvc /MT" CMAKE_SYSTEM_NAME=Windows CMAKE_SYSTEM_PROCESSOR=ARM64 MSVC=1 RUNTIME=MultiThreaded
     EXPECT RUSTFLAGS=-Ctarget-feature=+crt-static LINK=)
case("msvc /MTd" CMAKE_SYSTEM_NAME=Windows CMAKE_SYSTEM_PROCESSOR=ARM64 MSVC=1 RUNTIME=MultiThreadedDebug
     EXPECT RUSTFLAGS=-Ctarget-feature=+crt-static LINK=LINKER:/NODEFAULTLIB:libcmt.lib)
case("msvc /MT, /MTd in Debug" CMAKE_SYSTEM_NAME=Windows CMAKE_SYSTEM_PROCESSOR=ARM64 MSVC=1
     RUNTIME=MultiThreaded$<$<CONFIG:Debug>:Debug>
     EXPECT RUSTFLAGS=-Ctarget-feature=+crt-static LINK=$<$<CONFIG:Debug>:LINKER:/NODEFAULTLIB:libcmt.lib>)
# MinGW.
case("mingw x64" CMAKE_SYSTEM_NAME=Windows CMAKE_SYSTEM_PROCESSOR=x86_64 MINGW=1 CMAKE_CXX_COMPILER_ID=GNU
     EXPECT TRIPLES=x86_64-pc-windows-gnu LIB=libggml_t2p.a LIBS=${WINLIBS} RUSTFLAGS=)
case("llvm-mingw arm64" CMAKE_SYSTEM_NAME=Windows CMAKE_SYSTEM_PROCESSOR=aarch64 MINGW=1 CMAKE_CXX_COMPILER_ID=Clang
     EXPECT TRIPLES=aarch64-pc-windows-gnullvm LIB=libggml_t2p.a)
# macOS.
case("macos arm64 (no CMAKE_OSX_ARCHITECTURES)" CMAKE_SYSTEM_NAME=Darwin CMAKE_SYSTEM_PROCESSOR=arm64
     EXPECT TRIPLES=aarch64-apple-darwin LIB=libggml_t2p.a LIBS= RUSTFLAGS= LINK=)
case("macos x86_64" CMAKE_SYSTEM_NAME=Darwin CMAKE_SYSTEM_PROCESSOR=x86_64
     EXPECT TRIPLES=x86_64-apple-darwin LIB=libggml_t2p.a)
case("macos arm64 on an Intel host" CMAKE_SYSTEM_NAME=Darwin CMAKE_SYSTEM_PROCESSOR=x86_64 CMAKE_OSX_ARCHITECTURES=arm64
     EXPECT TRIPLES=aarch64-apple-darwin)
case("macos universal" CMAKE_SYSTEM_NAME=Darwin CMAKE_SYSTEM_PROCESSOR=arm64 CMAKE_OSX_ARCHITECTURES=arm64,x86_64
     EXPECT TRIPLES=aarch64-apple-darwin,x86_64-apple-darwin LIB=libggml_t2p.a)
case("macos arm64e" CMAKE_SYSTEM_NAME=Darwin CMAKE_SYSTEM_PROCESSOR=arm64 CMAKE_OSX_ARCHITECTURES=arm64e
     EXPECT ERROR=arm64e)
# Linux and Android.
case("linux native" CMAKE_SYSTEM_NAME=Linux CMAKE_SYSTEM_PROCESSOR=x86_64 CMAKE_DL_LIBS=dl
     EXPECT TRIPLES= LIB=libggml_t2p.a LIBS=Threads::Threads,dl,m)
case("linux cross aarch64" CMAKE_SYSTEM_NAME=Linux CMAKE_SYSTEM_PROCESSOR=aarch64 CMAKE_CROSSCOMPILING=1
     EXPECT TRIPLES=aarch64-unknown-linux-gnu LIB=libggml_t2p.a)
case("android arm64-v8a" CMAKE_SYSTEM_NAME=Android CMAKE_SYSTEM_PROCESSOR=aarch64 CMAKE_ANDROID_ARCH_ABI=arm64-v8a
     CMAKE_CROSSCOMPILING=1
     EXPECT TRIPLES=aarch64-linux-android LIB=libggml_t2p.a LIBS=dl,m)
case("freebsd cross" CMAKE_SYSTEM_NAME=FreeBSD CMAKE_SYSTEM_PROCESSOR=amd64 CMAKE_CROSSCOMPILING=1
     EXPECT ERROR=GGML_CPU_T2P_RUST_TARGET)
# An explicit triple wins.
case("explicit triple" CMAKE_SYSTEM_NAME=Windows CMAKE_SYSTEM_PROCESSOR=ARM64 MSVC=1
     GGML_CPU_T2P_RUST_TARGET=aarch64-pc-windows-msvc
     EXPECT TRIPLES=aarch64-pc-windows-msvc LIB=ggml_t2p.lib)

message("${_cases} cases, ${_failures} failures")
if (_failures)
    message(FATAL_ERROR "ggml_t2p_rust_target: ${_failures} of ${_cases} cases failed")
endif()
