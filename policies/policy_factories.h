// Constructors of the individual policies (one .cpp each); make_policy() picks among them.
#pragma once

#include <memory>

#include "policies/kv_policy.h"

namespace offgen::policies {

// The policies that never evict (full, quest): every prompt position, in order (a prompt longer
// than the budget the cache was sized for is an error naming the policy), and the refusal of a
// victim.
std::vector<int> every_prompt_position(const KvPolicy& policy, int prompt_len);
[[noreturn]] void refuse_eviction(const KvPolicy& policy);

std::unique_ptr<KvPolicy> make_full(int budget);
std::unique_ptr<KvPolicy> make_local(int budget);
std::unique_ptr<KvPolicy> make_h2o(int budget, double recent_fraction);
std::unique_ptr<KvPolicy> make_streaming(int budget, int sinks);
std::unique_ptr<KvPolicy> make_tova(int budget);
std::unique_ptr<KvPolicy> make_snapkv(int budget, int observation_window, int pool_kernel);
std::unique_ptr<KvPolicy> make_pyramidkv(int budget, int observation_window, int pool_kernel,
                                         int beta);
// budget: the tokens the cache keeps (the whole sequence); attended: C, tokens per step;
// dense_layers: the first layers, which attend every token.
std::unique_ptr<KvPolicy> make_quest(int budget, int page_size, int attended, int dense_layers);

}  // namespace offgen::policies
