#include <cstdio>
int main() { std::puts("replayssm"); return 0; }
