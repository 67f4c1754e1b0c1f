// `shardplan plan`, `estimate` and `compare`: the planner on the command line (docs/user-guide.md
// "plan"). plan searches and ranks; estimate prices one configuration (unpinned dimensions from
// their defaults) with its full bill; compare gives the best plan of each named strategy.
//   shardplan plan --model llama3-70b --cluster dgx-h100 --gpus 64 --seq 4096 --global-batch 256
//       [--tp 8 ...pins] [--top 10] [--out plan.json] [--explain] [--json]
//   shardplan estimate ... same flags, one configuration
//   shardplan compare ... [--strategies ddp,zero1,zero2,fsdp,tp,fsdp+tp,3d,ep,auto] [--svg
//   chart.svg]
#include <algorithm>
#include <array>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/file_io.h"
#include "base/strict_json.h"
#include "planner/cli/cli_common.h"
#include "planner/cli/compare_chart.h"
#include "planner/cli/compare_sweep.h"
#include "planner/cli/count_text.h"
#include "planner/cli/plan_args.h"
#include "planner/cli/plan_text.h"
#include "planner/cli/text_format.h"
#include "planner/plan/plan_file.h"
#include "planner/plan/plan_view.h"
#include "planner/search/strategies.h"

namespace shardplan::cli {
namespace {

using planner::Bill;
using planner::PlanResult;

// The MFU of a plan both ways (docs/cost-model.md §2.4), naming the peak it divides.
std::string mfu_text(const planner::Planner& p, const PlanResult& r) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << "MFU " << 100 * r.mfu << "% of the "
     << planner::gemm_dtype(p.cluster(), r.config.precision)
     << " peak counting attention's full square, " << 100 * r.mfu_causal
     << "% counting the causal half; " << throughput_text(p, r) << "\n";
  return os.str();
}

// The ranked row; the rank order is named where it is not the default tp-inner, so two rows of
// the same degrees never look alike.
std::string row_text(const PlanResult& r) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(3) << std::setw(9) << r.step_time_s << " s  "
     << std::setprecision(1) << std::setw(5) << 100 * r.mfu << "% MFU  " << std::setw(10)
     << human_bytes(static_cast<double>(r.memory_bytes)) << "/GPU  " << config_text(r.config);
  if (r.order != planner::DimOrder::kTpInner) os << "  ranks " << planner::to_string(r.order);
  return os.str();
}

// "llama3-8b on 8 x H100 SXM5 80 GB (dgx-h100), seq 4096, global batch 64": the job a result is
// for, first in every text output.
std::string job_text(const PlanArgs& a, const planner::Planner& p) {
  return a.model + " on " + gpus_text(a, p) + " (" + a.where.cluster + "), seq " +
         std::to_string(a.seq) + ", global batch " + std::to_string(a.global_batch);
}

// "stage_communication" -> "stage communication": a JSON key as text.
std::string text_name(std::string_view key) {
  std::string s(key);
  std::replace(s.begin(), s.end(), '_', ' ');
  return s;
}

void print_bill_text(const Bill& b) {
  std::cout << "  memory per GPU: parameters "
            << human_bytes(static_cast<double>(b.parameter_bytes)) << ", gradients "
            << human_bytes(static_cast<double>(b.gradient_bytes)) << ", optimizer "
            << human_bytes(static_cast<double>(b.optimizer_bytes)) << ", activations "
            << human_bytes(static_cast<double>(b.activation_bytes)) << ", transient "
            << human_bytes(static_cast<double>(b.transient_bytes)) << ", overhead "
            << human_bytes(static_cast<double>(b.overhead_bytes)) << " (stage " << b.peak_stage
            << ")\n"
            << std::fixed << std::setprecision(3) << "  time (pacing stage " << b.pacing_stage
            << "):";
  for (const planner::BillTimePart& t : planner::time_parts(b)) {
    std::cout << (t.name == "compute" ? " " : ", ") << text_name(t.name) << " " << t.seconds
              << " s";
  }
  std::cout << "\n";
  for (const planner::BillCollective& c : b.collectives) {
    std::cout << "  " << std::setw(52) << std::left << c.what << std::right << " " << c.mesh_dim
              << "[" << c.group_size << "] " << std::setw(10)
              << human_bytes(static_cast<double>(c.bytes)) << " x" << c.calls << "  "
              << std::setprecision(4) << c.seconds << " s, exposed " << c.exposed_s << " s\n";
  }
}

// The rule that rejected the most candidates (ties: the first by name), or null.
const std::pair<const std::string, planner::Rejection>* top_rule(const planner::SearchResult& r) {
  const std::pair<const std::string, planner::Rejection>* top = nullptr;
  for (const auto& entry : r.rejected) {
    if (top == nullptr || entry.second.count > top->second.count) top = &entry;
  }
  return top;
}

// "the 80 GiB of an H100 SXM" and, with --memory-headroom, " less 4 GiB kept free": what a plan
// must fit in.
std::string budget_text(const planner::Planner& p) {
  const double headroom = p.context().memory_headroom_bytes;
  return human_bytes(p.context().memory_capacity_bytes) + " of a " + p.cluster().accelerator.model +
         (headroom > 0 ? " less " + human_bytes(headroom) + " kept free" : "");
}

// "--tp 8 --pp 4 ...: needs 95.2 GiB per GPU, 15.2 GiB over the 80 GiB of an H100": one rule's
// first candidate; a pruned one shows the degrees the search had chosen when it was pruned.
std::string rejection_text(const planner::Planner& p, const planner::Rejection& x) {
  std::string s = config_text(x.first);
  if (x.memory_bytes) {
    s += ": needs " + human_bytes(static_cast<double>(*x.memory_bytes)) + " per GPU, " +
         human_bytes(static_cast<double>(*x.memory_bytes) - p.context().memory_budget()) +
         " over the " + budget_text(p);
  }
  return s;
}

// "rejected": {rule: count}; "rejected_samples": {rule: the first candidate it rejected}.
void add_rejected_json(const planner::Planner& p, const planner::SearchResult& r,
                       nlohmann::ordered_json& j) {
  nlohmann::ordered_json counts = nlohmann::ordered_json::object();
  nlohmann::ordered_json samples = nlohmann::ordered_json::object();
  for (const auto& [rule, x] : r.rejected) {
    counts[rule] = x.count;
    nlohmann::ordered_json s = planner::config_json(x.first);
    if (x.memory_bytes) {
      s["resource"] = "memory_per_gpu";
      s["memory_per_gpu_bytes"] = *x.memory_bytes;
      s["capacity_bytes"] = static_cast<int64_t>(p.context().memory_capacity_bytes);
      s["over_by_bytes"] = *x.memory_bytes - static_cast<int64_t>(p.context().memory_budget());
    }
    s["message"] = rejection_text(p, x);
    samples[rule] = s;
  }
  j["rejected"] = counts;
  j["rejected_samples"] = samples;
}

// Nothing fits: how far the candidate needing the least memory is from fitting, in one line.
std::string nothing_fits_text(const planner::Planner& p, const planner::SearchResult& r) {
  std::string s = "nothing fits in memory: ";
  if (!r.least_memory) return s + "no candidate was priced";
  const PlanResult& c = *r.least_memory;
  return s + "the candidate needing the least memory (" + config_text(c.config) + ") needs " +
         human_bytes(static_cast<double>(c.memory_bytes)) + " per GPU, " +
         human_bytes(static_cast<double>(c.memory_bytes) - p.context().memory_budget()) +
         " more than the " + budget_text(p) +
         "; more GPUs, a shorter --seq or a smaller --global-batch may fit";
}

nlohmann::ordered_json nothing_fits_json(const planner::Planner& p,
                                         const planner::SearchResult& r) {
  nlohmann::ordered_json j;
  j["resource"] = "memory_per_gpu";
  j["capacity_bytes"] = static_cast<int64_t>(p.context().memory_capacity_bytes);
  if (r.least_memory) {
    j["closest"] = planner::plan_view_json(p, *r.least_memory);
    j["short_by_bytes"] =
        r.least_memory->memory_bytes - static_cast<int64_t>(p.context().memory_budget());
  }
  j["message"] = nothing_fits_text(p, r);
  return j;
}

// Why the best beat each runner-up: the bill terms side by side, largest difference first.
// Why `best` beat `other`, term by term (other's time parts minus best's): a line of text when
// `text`, and the JSON entry either way.
nlohmann::ordered_json explain_pair(planner::Planner& p, const Bill& best, const PlanResult& b,
                                    const PlanResult& other, const std::string& label, bool text) {
  Bill o;
  (void)p.estimate(other.config, other.order, &o);
  const std::array<planner::BillTimePart, planner::kBillTimeParts> x = planner::time_parts(best);
  const std::array<planner::BillTimePart, planner::kBillTimeParts> y = planner::time_parts(o);
  nlohmann::ordered_json e;
  e["runner_up"] = config_text(other.config);
  e["slower_by_s"] = other.step_time_s - b.step_time_s;
  e["terms_s"] = nlohmann::ordered_json::object();
  for (size_t k = 0; k < x.size(); ++k)
    e["terms_s"][text_name(x[k].name)] = y[k].seconds - x[k].seconds;
  const int64_t more_memory = other.memory_bytes - b.memory_bytes;
  e["memory_difference_bytes"] = more_memory;
  if (text) {
    std::cout << "  vs " << label << " (" << config_text(other.config) << "): " << std::fixed
              << std::setprecision(3) << "+" << e["slower_by_s"].get<double>() << " s:";
    for (const auto& [name, d] : e["terms_s"].items()) {
      std::cout << " " << name << " " << std::showpos << d.get<double>() << std::noshowpos;
    }
    std::cout << "; memory " << (more_memory >= 0 ? "+" : "-")
              << human_bytes(static_cast<double>(more_memory >= 0 ? more_memory : -more_memory))
              << "/GPU\n";
  }
  return e;
}

void explain(planner::Planner& p, const std::vector<PlanResult>& top, nlohmann::ordered_json* j) {
  if (top.size() < 2) return;
  Bill best;
  (void)p.estimate(top[0].config, top[0].order, &best);
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t i = 1; i < std::min<size_t>(top.size(), 4); ++i) {
    out.push_back(explain_pair(p, best, top[0], top[i], "#" + std::to_string(i + 1), j == nullptr));
  }
  if (j != nullptr) (*j)["explain"] = out;
}

// --against STRATEGY: the best plan against the best of a named strategy ("why not FSDP?").
void explain_against(planner::Planner& p, const planner::Pins& pins, const PlanResult& best_plan,
                     const std::string& name, nlohmann::ordered_json* j) {
  const std::vector<planner::Strategy> s = planner::parse_strategies(name);
  SP_CHECK(s.size() == 1, "--against '", name, "', expected one strategy");
  const std::vector<planner::Planner::Best> b = p.best_of_each(pins, {s[0].keep}, nullptr);
  nlohmann::ordered_json e;
  e["strategy"] = s[0].name;
  if (!b[0].best) {
    std::string why =
        b[0].evaluated == 0 ? "no configuration of it is possible (" + s[0].needs + ")" : "";
    for (const auto& [reason, n] : b[0].rejected) {
      why += (why.empty() ? "" : "; ") + std::to_string(n) + " of " +
             std::to_string(b[0].evaluated) + " configurations " + reason;
    }
    e["fits"] = false;
    e["reason"] = why;
    if (j == nullptr) std::cout << "  vs " << s[0].name << ": no plan of it fits: " << why << "\n";
  } else if (b[0].best->config == best_plan.config && b[0].best->order == best_plan.order) {
    e["fits"] = true;
    e["is_best"] = true;
    if (j == nullptr) std::cout << "  vs " << s[0].name << ": the best plan is one\n";
  } else {
    Bill best;
    (void)p.estimate(best_plan.config, best_plan.order, &best);
    e = explain_pair(p, best, best_plan, *b[0].best, s[0].name, j == nullptr);
    e["strategy"] = s[0].name;
    e["fits"] = true;
  }
  if (j != nullptr) (*j)["explain_against"] = e;
}

}  // namespace

void register_plan(CLI::App& app, CliContext& ctx) {
  CLI::App& cmd = add_verb(app, ctx, "plan",
                           "Search parallelism strategies: the fastest plans that fit, ranked");
  auto a = std::make_shared<PlanArgs>();
  auto top = std::make_shared<int64_t>(10);
  auto out = std::make_shared<std::string>();
  auto why = std::make_shared<bool>(false);
  add_plan_options(cmd, *a);
  cmd.add_option("--top", *top, "How many plans to list (default 10)")
      ->transform(positive_count("plans"))
      ->type_name("K");
  CLI::Option* out_flag =
      cmd.add_option("--out", *out, "Write the best plan to this file (plan.json, atomically)")
          ->type_name("PATH");
  cmd.add_flag("--explain", *why, "Say why the best plan beat the runners-up, term by term");
  auto against = std::make_shared<std::string>();
  cmd.add_option("--against", *against,
                 "With --explain: also against the best plan of this strategy (ddp, zero1, "
                 "zero2, fsdp, tp, fsdp+tp, 3d, ep)")
      ->type_name("STRATEGY");
  cmd.callback([&ctx, a, top, out, why, out_flag, against] {
    SP_CHECK(against->empty() || *why, "--against ", *against,
             " explains a comparison, expected "
             "it with --explain");
    // Before any work: `--out ""` and a FIFO, device or folder there are bad input.
    const bool writes_plan = out_flag->count() > 0;
    if (writes_plan) check_output_path(*out, "--out");
    std::unique_ptr<planner::Planner> p = a->planner();
    const planner::SearchResult r = p->search(a->pins(), std::max<int64_t>(*top, 4));
    std::vector<PlanResult> shown(
        r.top.begin(), r.top.begin() + std::min<int64_t>(*top, static_cast<int64_t>(r.top.size())));
    Bill bill;
    if (!r.top.empty()) (void)p->estimate(r.top[0].config, r.top[0].order, &bill);
    if (writes_plan && !r.top.empty()) {
      write_file_atomically(
          *out, planner::plan_to_json(planner::plan_file(*p, r.top[0], a->model)).dump(2) + "\n",
          "--out");
    }
    if (ctx.json) {
      nlohmann::ordered_json j;
      j["setup"] = setup_json(*a, *p);
      if (r.top.empty()) {
        j["best"] = nullptr;
      } else {
        j["best"] = planner::plan_view_json(*p, r.top[0]);
        j["best"]["bill"] = planner::bill_json(bill);
      }
      j["top"] = nlohmann::ordered_json::array();
      for (const PlanResult& x : shown) j["top"].push_back(planner::plan_view_json(*p, x));
      j["pareto"] = nlohmann::ordered_json::array();
      for (const PlanResult& x : r.pareto) j["pareto"].push_back(planner::plan_view_json(*p, x));
      j["evaluated"] = r.evaluated;
      j["feasible"] = r.feasible;
      j["pruned"] = r.pruned;
      add_rejected_json(*p, r, j);
      if (r.top.empty()) j["nothing_fits"] = nothing_fits_json(*p, r);
      j["search_seconds"] = r.search_seconds;
      j["cached_blocks"] = r.cached_blocks;
      j["cached_work"] = r.cached_work;
      if (*why) explain(*p, r.top, &j);
      if (!against->empty() && !r.top.empty())
        explain_against(*p, a->pins(), r.top[0], *against, &j);
      print_json_document(j);
      if (r.top.empty()) {
        print_error_line("shardplan: " + nothing_fits_text(*p, r));
        ctx.exit_code = ExitCode::kNothingFits;
      }
      return;
    }
    std::cout << job_text(*a, *p) << ": " << r.evaluated << " configurations evaluated ("
              << r.feasible << " fit, " << r.pruned << " pruned) in " << std::fixed
              << std::setprecision(3) << r.search_seconds << " s\n";
    if (const auto* most = top_rule(r)) {
      std::cout << "rejected most by \"" << most->first << "\": " << most->second.count
                << " candidates, first " << rejection_text(*p, most->second) << "\n";
    }
    if (r.top.empty()) {
      std::cout << "no plan fits; rejected per rule:\n";
      for (const auto& [rule, x] : r.rejected) {
        std::cout << "  " << rule << ": " << x.count << "\n";
      }
      std::cout << nothing_fits_text(*p, r) << "\n";
      if (writes_plan) std::cout << "no plan written to " << *out << "\n";
      std::cout.flush();
      print_error_line("shardplan: " + nothing_fits_text(*p, r));
      ctx.exit_code = ExitCode::kNothingFits;
      return;
    }
    for (size_t i = 0; i < shown.size(); ++i) {
      std::cout << std::setw(3) << i + 1 << ". " << row_text(shown[i]) << "\n";
    }
    std::cout << "best plan's bill:\n" << mfu_text(*p, r.top.front());
    print_bill_text(bill);
    if (*why) explain(*p, r.top, nullptr);
    if (!against->empty()) explain_against(*p, a->pins(), r.top[0], *against, nullptr);
    if (writes_plan) std::cout << "wrote " << *out << "\n";
  });
}

void register_estimate(CLI::App& app, CliContext& ctx) {
  CLI::App& cmd = add_verb(app, ctx, "estimate",
                           "Price one configuration: step time, MFU, memory and the full bill");
  auto a = std::make_shared<PlanArgs>();
  add_plan_options(cmd, *a);
  cmd.callback([&ctx, a] {
    std::unique_ptr<planner::Planner> p = a->planner();
    const planner::ParallelConfig c =
        planner::default_config(p->setup(), a->pins(), planner::parse_precision(a->precision));
    Bill bill;
    const PlanResult r = p->estimate(c, planner::DimOrder::kTpInner, &bill);
    const bool fits = r.fits;
    if (ctx.json) {
      nlohmann::ordered_json j;
      j["setup"] = setup_json(*a, *p);
      j["plan"] = planner::plan_view_json(*p, r);
      j["plan"]["fits"] = fits;
      j["plan"]["bill"] = planner::bill_json(bill);
      print_json_document(j);
      return;
    }
    // A configuration that does not fit is still an answer (exit 0): say by how much.
    std::cout << job_text(*a, *p) << ": one configuration priced\n"
              << row_text(r)
              << (fits ? ""
                       : "  (does not fit: " +
                             human_bytes(static_cast<double>(r.memory_bytes) -
                                         p->context().memory_budget()) +
                             " more than the " + budget_text(*p) + " per GPU)")
              << "\n"
              << mfu_text(*p, r);
    print_bill_text(bill);
  });
}

void register_compare(CLI::App& app, CliContext& ctx) {
  CLI::App& cmd =
      add_verb(app, ctx, "compare",
               "Compare named strategies (ddp, zero1, ..., auto) at their best settings");
  auto a = std::make_shared<PlanArgs>();
  auto list = std::make_shared<std::string>();  // empty: default_strategies(model)
  auto svg = std::make_shared<std::string>();
  auto price = std::make_shared<double>(0);
  auto tokens = std::make_shared<std::string>();
  add_plan_options(cmd, *a, /*sweep=*/true);
  CLI::Option* price_flag =
      cmd.add_option("--price-per-gpu-hour", *price,
                     "USD per GPU-hour for the cost columns (overrides the cluster files' "
                     "price_per_gpu_hour_usd)")
          ->check(number_in(1e-6, 1e4, "US dollars per GPU-hour"))
          ->type_name("USD");
  cmd.add_option("--tokens", *tokens,
                 "A training budget in tokens for the time and cost columns: 15T, 2.5B, 1e12 "
                 "is not accepted (K, M, B, T are powers of ten)")
      ->type_name("N");
  cmd.add_option("--strategies", *list,
                 "Comma-separated: ddp, zero1, zero2, fsdp, tp, fsdp+tp, 3d, ep, auto (default "
                 "all; ep for MoE models)")
      ->type_name("LIST");
  CLI::Option* svg_flag =
      cmd.add_option("--svg", *svg, "Write a chart: step-time breakdown and memory per GPU")
          ->type_name("PATH");
  cmd.callback([&ctx, a, list, svg, svg_flag, price, price_flag, tokens] {
    SweepOptions sweep{*list, std::nullopt, 0, *svg};
    if (price_flag->count() > 0) sweep.price = *price;
    if (!tokens->empty()) {
      const std::optional<int64_t> n = parse_decimal_count(*tokens);
      SP_CHECK(n && *n > 0, "--tokens '", printable(*tokens, 40),
               "', expected a positive token count such as 15T, 2.5B or 300000000 (K, M, B, T: "
               "powers of ten)");
      sweep.tokens = *n;
    }
    // Several clusters or GPU counts, a price or a budget: the sweep's table.
    if (a->sweeps() || sweep.price || sweep.tokens > 0) {
      run_compare_sweep(ctx, *a, sweep);
      return;
    }
    const bool writes_chart = svg_flag->count() > 0;
    if (writes_chart) check_output_path(*svg, "--svg");
    std::unique_ptr<planner::Planner> p = a->planner();
    const std::vector<planner::Strategy> strategies =
        planner::parse_strategies(list->empty() ? planner::default_strategies(p->model()) : *list);
    std::vector<std::function<bool(const planner::ParallelConfig&)>> filters;
    for (const planner::Strategy& s : strategies) filters.push_back(s.keep);
    planner::SearchResult all;
    const std::vector<planner::Planner::Best> best = p->best_of_each(a->pins(), filters, &all);
    std::vector<ChartRow> chart;
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (size_t i = 0; i < strategies.size(); ++i) {
      nlohmann::ordered_json row;
      row["strategy"] = strategies[i].name;
      ChartRow cr;
      cr.strategy = strategies[i].name;
      if (best[i].best) {
        Bill bill;
        (void)p->estimate(best[i].best->config, best[i].best->order, &bill);
        const nlohmann::ordered_json fields = planner::plan_view_json(*p, *best[i].best);
        for (auto it = fields.begin(); it != fields.end(); ++it) row[it.key()] = it.value();
        row["fits"] = true;
        row["bill"] = planner::bill_json(bill);
        cr.fits = true;
        cr.bill = bill;
        cr.step_time_s = best[i].best->step_time_s;
        cr.memory_bytes = best[i].best->memory_bytes;
        std::ostringstream detail;
        detail << config_text(best[i].best->config) << "  |  " << std::fixed << std::setprecision(1)
               << 100 * best[i].best->mfu << "% MFU";
        cr.detail = detail.str();
      } else {
        row["fits"] = false;
        std::string why = best[i].evaluated == 0 ? "no configuration of this strategy is possible "
                                                   "for this job (" +
                                                       strategies[i].needs + ")"
                                                 : "";
        for (const auto& [reason, n] : best[i].rejected) {
          why += (why.empty() ? "" : "; ") + std::to_string(n) + " of " +
                 std::to_string(best[i].evaluated) + " configurations " + reason;
        }
        row["reason"] = why;
        cr.reason = why;
      }
      rows.push_back(row);
      chart.push_back(cr);
    }
    const bool none_fits = std::none_of(best.begin(), best.end(),
                                        [](const planner::Planner::Best& b) { return b.best; });
    if (none_fits) ctx.exit_code = ExitCode::kNothingFits;
    // A run that exits non-zero writes nothing, as plan --out on exit 3.
    if (writes_chart && !none_fits) {
      write_file_atomically(*svg,
                            compare_chart_svg(chart, p->context().memory_capacity_bytes,
                                              a->model + " on " + gpus_text(*a, *p) + ", seq " +
                                                  std::to_string(a->seq) + ", global batch " +
                                                  std::to_string(a->global_batch)),
                            "--svg");
    }
    if (ctx.json) {
      nlohmann::ordered_json j;
      j["setup"] = setup_json(*a, *p);
      j["strategies"] = rows;
      j["evaluated"] = all.evaluated;
      j["search_seconds"] = all.search_seconds;
      if (none_fits) j["nothing_fits"] = nothing_fits_json(*p, all);
      print_json_document(j);
      if (none_fits) print_error_line("shardplan: " + nothing_fits_text(*p, all));
      return;
    }
    std::cout << std::left << std::setw(9) << "strategy" << std::right << "  result\n";
    for (const auto& row : rows) {
      std::cout << std::left << std::setw(9) << row["strategy"].get<std::string>() << std::right
                << "  ";
      if (row["fits"].get<bool>()) {
        std::cout << std::fixed << std::setprecision(3) << std::setw(9)
                  << row["step_time_s"].get<double>() << " s  " << std::setprecision(1)
                  << std::setw(5) << 100 * row["mfu"].get<double>() << "% MFU  " << std::setw(10)
                  << human_bytes(static_cast<double>(row["memory_per_gpu_bytes"].get<int64_t>()))
                  << "/GPU  tp " << row["tp"] << " pp " << row["pp"] << " dp " << row["dp"];
        // The dimensions that split further only where they do.
        // etp only where it differs from tp (whole experts, etp 1).
        for (const std::string d : {"cp", "ep", "etp"}) {
          if (row.contains(d) && (d == "etp" || row[d].get<int64_t>() > 1))
            std::cout << " " << d << " " << row[d];
        }
        std::cout << " zero " << row["zero"] << " mb " << row["micro_batch"] << " "
                  << row["recompute"].get<std::string>();
        std::cout << recompute_layers_text(row["recompute_layers"].get<int64_t>()) << "\n";
      } else {
        std::cout << "does not fit: " << row["reason"].get<std::string>() << "\n";
      }
    }
    if (writes_chart && !none_fits) std::cout << "wrote " << *svg << "\n";
    if (none_fits) {
      std::cout << nothing_fits_text(*p, all) << "\n";
      std::cout.flush();
      print_error_line("shardplan: " + nothing_fits_text(*p, all));
    }
  });
}

}  // namespace shardplan::cli
