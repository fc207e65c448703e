# A real toolchain file: MinGW-w64 (Debian: gcc-mingw-w64-x86-64, g++-mingw-w64-x86-64) building
# for Windows x64 on Linux. The -posix compilers are preferred: with GCC 12 only the posix thread
# model has std::thread and std::mutex, which llama.cpp needs. Usable for a llama.cpp cross build:
#   cmake -DCMAKE_TOOLCHAIN_FILE=<ggml-t2p>/ggml-glue/cmake-tests/toolchains/mingw-w64-x86_64.cmake ...
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(_mingw x86_64-w64-mingw32)
find_program(_mingw_cc NAMES ${_mingw}-gcc-posix ${_mingw}-gcc REQUIRED)
find_program(_mingw_cxx NAMES ${_mingw}-g++-posix ${_mingw}-g++ REQUIRED)
find_program(_mingw_rc NAMES ${_mingw}-windres)
set(CMAKE_C_COMPILER "${_mingw_cc}")
set(CMAKE_CXX_COMPILER "${_mingw_cxx}")
if (_mingw_rc)
    set(CMAKE_RC_COMPILER "${_mingw_rc}")
endif()
set(CMAKE_FIND_ROOT_PATH /usr/${_mingw})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
