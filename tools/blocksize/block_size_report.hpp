#pragma once
// What `kvrt blocksize` prints and writes: the cost vector per P_a as a
// text table or one JSON object, SVG charts for a report directory, the
// requests a `kvrt run` workload makes, and a weighted score only when the
// user names the weights (0x09A: no score is fabricated).
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tools/blocksize/block_size_sweep.hpp"
#include "tools/workload/workload.hpp"

namespace kvrt {

// The requests of a workload in generation order: a chat's turns carry the
// history (earlier prompts and answers), few-shot and long-document
// questions sit behind their shared prefix, a fork job is one request of
// `branches` branches; the namespace salts each (tenants never share).
// Generated tokens are deterministic ids drawn from the job, the turn and
// the position (a model would produce others; the structure is the same).
std::vector<SweepRequest> sweep_requests(const workload::Workload& workload);

// The components a weighting may name, in the order they print.
const std::vector<std::string>& weighable_components();
// component -> weight; a score is sum_c weight_c * value_c(P_a).
using CostWeights = std::map<std::string, double>;
// "name=w"; errors name the weight (invalid_argument, field "weight").
Result<std::pair<std::string, double>> parse_weight(const std::string& text);
// The value of one component at one P_a (the kernel ones at P_k = P_a when
// measured, else 0).
double component_value(const BlockSizeCost& c, const std::string& component, uint64_t row_bytes);

nlohmann::ordered_json block_size_json(const BlockSizeSweep& sweep, const CostWeights& weights);
std::string block_size_text(const BlockSizeSweep& sweep, const CostWeights& weights);
// blocksize.json and one chart per component family (storage, hits,
// copy-on-write, kernel, mapping) under `dir`, created if missing. Errors: io.
Status write_block_size_report(const BlockSizeSweep& sweep, const CostWeights& weights, const std::string& dir);

}  // namespace kvrt
