// Linux epoll and timerfd for the benchmark's load generator (Glibc's module map leaves them out).
#pragma once
#include <sys/epoll.h>
#include <sys/timerfd.h>
