// Linux epoll for the benchmark's load generator (Glibc's module map leaves it out).
#pragma once
#include <sys/epoll.h>
