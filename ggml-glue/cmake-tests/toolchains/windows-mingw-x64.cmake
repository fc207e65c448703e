# Mock: MinGW-w64 GCC 12 (x86_64-w64-mingw32-gcc) cross-compiling for Windows x64. Compiler checks
# are skipped (forced ids); CMAKE_COMPILER_IS_MINGW is what compiler detection would find
# (__MINGW32__), from which CMake sets MINGW.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_VERSION 10.0)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
foreach (lang C CXX)
    set(CMAKE_${lang}_COMPILER "${CMAKE_CURRENT_LIST_DIR}/fake-compiler")
    set(CMAKE_${lang}_COMPILER_FORCED TRUE)
    set(CMAKE_${lang}_COMPILER_ID_RUN TRUE)
    set(CMAKE_${lang}_COMPILER_ID GNU)
    set(CMAKE_${lang}_COMPILER_VERSION 12.2.0)
    set(CMAKE_${lang}_COMPILER_FRONTEND_VARIANT GNU)
endforeach()
set(CMAKE_COMPILER_IS_MINGW 1)
set(CMAKE_RC_COMPILER "${CMAKE_CURRENT_LIST_DIR}/fake-compiler")
set(CMAKE_AR "${CMAKE_CURRENT_LIST_DIR}/fake-compiler")
set(CMAKE_RANLIB "${CMAKE_CURRENT_LIST_DIR}/fake-compiler")
