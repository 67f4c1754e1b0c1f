// shardplan: the command-line entry point; everything is in run.cpp.
#include "planner/cli/run.h"

int main(int argc, char** argv) { return shardplan::cli::run(argc, argv); }
