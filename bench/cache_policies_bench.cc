// Hit ratio of each block-cache policy over a trace, by cache size
// (trace/analysis/cache_policies.h), until `pacset-trace` wires the command:
//   cache_policies_bench TRACE [--model PAC] [--forest NAME] [--share S] [--json]
#include <cstdio>
#include <iostream>
#include <string>

#include "trace/analysis/cache_policies.h"

int main(int argc, char** argv) {
  pacset::CachePoliciesCliOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const bool has_value = i + 1 < argc;
    if (s == "--model" && has_value) {
      o.model = argv[++i];
    } else if (s == "--forest" && has_value) {
      o.forest = argv[++i];
    } else if (s == "--share" && has_value) {
      o.protected_share = std::stod(argv[++i]);
    } else if (s == "--json") {
      o.json = true;
    } else if (o.trace.empty()) {
      o.trace = s;
    } else {
      std::fprintf(stderr, "usage: cache_policies_bench TRACE [--model PAC] [--forest NAME]\n");
      return 2;
    }
  }
  const pacset::Status st = pacset::RunCachePoliciesCommand(o, std::cout);
  if (!st.ok()) {
    std::fprintf(stderr, "cache_policies_bench: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
