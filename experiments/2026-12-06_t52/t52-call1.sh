#!/bin/bash
# t52, device call 1: t51-call4 as prepared (the H200 target rows; about
# 200 s; carry gpubin-x/t51f.tar.xz; on another card it prints the name and
# stops). It never ran: no device started.
#   run: bash experiments/2026-12-06_t52/t52-call1.sh
exec bash "$(dirname "$0")/../2026-12-06_t51/t51-call4.sh"
