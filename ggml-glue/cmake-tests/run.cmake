# cmake [-DWORK=<scratch dir>] -P ggml-glue/cmake-tests/run.cmake
#
# Checks the CMake side of ggml-t2p for toolchains this machine does not have:
#  1. test-target.cmake: ggml_t2p_rust_target on the variables of 23 toolchains (script mode);
#  2. a configure of mock/ (a stand-in for ggml-cpu's CMake that includes ggml-t2p.cmake as the
#     patch does) under the mock toolchains in toolchains/ (MSVC ARM64, clang-cl x64, MinGW-w64 GCC
#     x64, AppleClang arm64 and universal): forced compiler ids, a fake compiler, so CMake loads its
#     real Windows / Darwin platform modules; nothing is compiled. Where x86_64-w64-mingw32-gcc and
#     -g++ are installed, also a configure with the real MinGW-w64 compilers (toolchains/mingw-w64-x86_64.cmake). Checked: the cargo command(s) in the generated
#     Makefiles, the consumer's link line, and the patch hunk's error without GGML_CPU_T2P_DIR.
# Exit status 0 when every check passes.

cmake_minimum_required(VERSION 3.16)
get_filename_component(here "${CMAKE_CURRENT_LIST_DIR}" ABSOLUTE)
get_filename_component(root "${here}/../.." ABSOLUTE)
if (NOT WORK)
    set(WORK "${root}/target/cmake-tests")
endif()
file(MAKE_DIRECTORY "${WORK}")

execute_process(COMMAND "${CMAKE_COMMAND}" -P "${here}/test-target.cmake" RESULT_VARIABLE rc)
set(failures 0)
if (NOT rc EQUAL 0)
    math(EXPR failures "${failures} + 1")
endif()

# mock(<name> <toolchain> <build type> EXTRA <cmake args...> EXPECT <file>:<substring>... | ERROR <substring>)
function(mock name toolchain build_type)
    cmake_parse_arguments(M "" "ERROR" "EXTRA;EXPECT;ABSENT" ${ARGN})
    set(dir "${WORK}/${name}")
    file(REMOVE_RECURSE "${dir}")
    execute_process(
        COMMAND "${CMAKE_COMMAND}" -S "${here}/mock" -B "${dir}" -G "Unix Makefiles"
                "-DCMAKE_TOOLCHAIN_FILE=${here}/toolchains/${toolchain}.cmake" "-DCMAKE_BUILD_TYPE=${build_type}"
                -DGGML_CPU_T2P=ON "-DGGML_CPU_T2P_DIR=${root}" "-DGGML_CPU_T2P_CARGO=cargo" ${M_EXTRA}
        RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    set(bad "")
    if (M_ERROR)
        if (rc EQUAL 0 OR NOT "${out}${err}" MATCHES "${M_ERROR}")
            set(bad "expected a configure error matching '${M_ERROR}' (rc ${rc})")
        endif()
    elseif (NOT rc EQUAL 0)
        set(bad "configure failed: ${err}")
    else()
        foreach (e IN LISTS M_EXPECT M_ABSENT)
            string(FIND "${e}" ":" c)
            string(SUBSTRING "${e}" 0 ${c} f)
            math(EXPR c "${c} + 1")
            string(SUBSTRING "${e}" ${c} -1 want)
            if (f STREQUAL "configure")
                set(text "${out}")
            else()
                file(READ "${dir}/${f}" text)
            endif()
            string(FIND "${text}" "${want}" pos)
            list(FIND M_EXPECT "${e}" is_expect)
            if (is_expect GREATER -1 AND pos EQUAL -1)
                string(APPEND bad "\n     missing in ${f}: ${want}")
            elseif (is_expect EQUAL -1 AND pos GREATER -1)
                string(APPEND bad "\n     unexpected in ${f}: ${want}")
            endif()
        endforeach()
    endif()
    if (bad)
        message("FAIL mock ${name}: ${bad}")
        math(EXPR f "${failures} + 1")
        set(failures ${f} PARENT_SCOPE)
    else()
        message("ok   mock ${name}")
    endif()
endfunction()

set(cargo_mk "CMakeFiles/ggml_t2p_cargo.dir/build.make")
set(link_txt "CMakeFiles/mock-app.dir/link.txt")
set(winlibs "ggml_t2p.lib kernel32.lib advapi32.lib bcrypt.lib ntdll.lib userenv.lib ws2_32.lib dbghelp.lib synchronization.lib")

mock(msvc-arm64-release windows-msvc-arm64 Release
     EXPECT "configure:T2P system: Windows ARM64 MSVC=1 id=MSVC"
            "${cargo_mk}:--target aarch64-pc-windows-msvc"
            "${link_txt}:ggml-t2p-cargo/aarch64-pc-windows-msvc/release/${winlibs}"
     ABSENT "${link_txt}:NODEFAULTLIB" "${cargo_mk}:crt-static")
mock(msvc-arm64-debug windows-msvc-arm64 Debug
     EXPECT "${link_txt}:/NODEFAULTLIB:msvcrt.lib" "${link_txt}:${winlibs}")
mock(msvc-arm64-mt windows-msvc-arm64 Release EXTRA -DCMAKE_MSVC_RUNTIME_LIBRARY=MultiThreaded
     EXPECT "${cargo_mk}:--target aarch64-pc-windows-msvc --config \"target.aarch64-pc-windows-msvc.rustflags=['-Ctarget-feature=+crt-static']\""
     ABSENT "${link_txt}:NODEFAULTLIB")
mock(msvc-arm64-mtd windows-msvc-arm64 Debug EXTRA "-DCMAKE_MSVC_RUNTIME_LIBRARY=MultiThreaded$<$<CONFIG:Debug>:Debug>"
     EXPECT "${cargo_mk}:crt-static" "${link_txt}:/NODEFAULTLIB:libcmt.lib")
mock(clang-cl-x64 windows-clang-cl-x64 Release
     EXPECT "configure:T2P system: Windows AMD64 MSVC=1 id=Clang simulate=MSVC arch=x64"
            "${cargo_mk}:--target x86_64-pc-windows-msvc"
            "${link_txt}:ggml-t2p-cargo/x86_64-pc-windows-msvc/release/${winlibs}")
mock(macos-arm64 darwin-arm64 Release
     EXPECT "${cargo_mk}:--target aarch64-apple-darwin"
            "${link_txt}:ggml-t2p-cargo/aarch64-apple-darwin/release/libggml_t2p.a"
     ABSENT "${link_txt}:-framework" "${cargo_mk}:lipo")
mock(macos-universal darwin-universal Release
     EXPECT "${cargo_mk}:MACOSX_DEPLOYMENT_TARGET=13.3 cargo build --release --lib --no-default-features --manifest-path ${root}/Cargo.toml --target aarch64-apple-darwin"
            "${cargo_mk}:MACOSX_DEPLOYMENT_TARGET=13.3 cargo build --release --lib --no-default-features --manifest-path ${root}/Cargo.toml --target x86_64-apple-darwin"
            "${cargo_mk}:-create ${WORK}/macos-universal/ggml-t2p-cargo/aarch64-apple-darwin/release/libggml_t2p.a ${WORK}/macos-universal/ggml-t2p-cargo/x86_64-apple-darwin/release/libggml_t2p.a -output ${WORK}/macos-universal/ggml-t2p-cargo/universal/libggml_t2p.a"
            "${link_txt}:-arch arm64 -arch x86_64"
            "${link_txt}:ggml-t2p-cargo/universal/libggml_t2p.a")
set(link_rsp "CMakeFiles/mock-app.dir/linkLibs.rsp")   # MinGW makefiles pass the libraries in a response file
set(gnulibs "-lkernel32 -ladvapi32 -lbcrypt -lntdll -luserenv -lws2_32 -ldbghelp -lsynchronization")
mock(mingw-x64 windows-mingw-x64 Release
     EXPECT "configure:T2P system: Windows x86_64 MSVC= id=GNU"
            "configure:T2P triples: x86_64-pc-windows-gnu"
            "${cargo_mk}:--target x86_64-pc-windows-gnu"
            "${link_rsp}:ggml-t2p-cargo/x86_64-pc-windows-gnu/release/libggml_t2p.a\" ${gnulibs}"
     ABSENT "${link_rsp}:ggml_t2p.lib" "${link_rsp}:-lpthread" "${cargo_mk}:crt-static")
# The real MinGW-w64 cross compilers, where installed (Debian: gcc-mingw-w64-x86-64 g++-mingw-w64-x86-64):
# CMake's own compiler detection must yield MINGW and the same Rust target, library and link line.
# Both compilers: the toolchain file requires the C++ one too (Debian packages them apart).
find_program(mingw_gcc NAMES x86_64-w64-mingw32-gcc-posix x86_64-w64-mingw32-gcc)
find_program(mingw_gxx NAMES x86_64-w64-mingw32-g++-posix x86_64-w64-mingw32-g++)
if (mingw_gcc AND mingw_gxx)
    mock(mingw-x64-real mingw-w64-x86_64 Release
         EXPECT "configure:T2P system: Windows x86_64 MSVC= id=GNU"
                "${cargo_mk}:--target x86_64-pc-windows-gnu"
                "${link_rsp}:ggml-t2p-cargo/x86_64-pc-windows-gnu/release/libggml_t2p.a\" ${gnulibs}"
         ABSENT "${link_rsp}:-lpthread")
else()
    message("skip mock mingw-x64-real: no x86_64-w64-mingw32-gcc and -g++ (found: '${mingw_gcc}', '${mingw_gxx}'; the forced-id MinGW case above still ran)")
endif()
mock(no-dir windows-msvc-arm64 Release EXTRA -DGGML_CPU_T2P_DIR=
     ERROR "GGML_CPU_T2P is ON: set GGML_CPU_T2P_DIR to a ggml-t2p checkout")

if (failures)
    message(FATAL_ERROR "cmake-tests: ${failures} failed")
endif()
message("cmake-tests: all passed")
