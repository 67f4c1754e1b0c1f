#include "planner/cli/compare_sweep.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <vector>

#include "base/error.h"
#include "base/file_io.h"
#include "planner/cli/compare_chart.h"
#include "planner/cli/plan_text.h"
#include "planner/cli/text_format.h"
#include "planner/plan/plan_view.h"
#include "planner/search/strategies.h"

namespace shardplan::cli {
namespace {

struct SweepRow {
  std::string cluster, accelerator, strategy;
  int64_t gpus = 0;
  bool fits = false;
  std::string reason;  // when it does not
  planner::PlanResult plan;
  nlohmann::ordered_json view;
  std::optional<double> price;
  std::string price_source;
  double scaling = 0;  // tokens/s/GPU over that of the cluster's smallest count that fits
};

std::string fixed(double x, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << x;
  return os.str();
}

// The scaling chart: tokens/s per GPU against GPUs (log2 axis), one line per cluster.
std::string sweep_chart_svg(const std::vector<SweepRow>& rows, const std::string& title) {
  constexpr int kW = 900, kH = 520, kLeft = 90, kRight = 220, kTop = 70, kBottom = 70;
  std::map<std::string, std::vector<const SweepRow*>> lines;
  int64_t gmin = 0, gmax = 0;
  double ymax = 0;
  for (const SweepRow& r : rows) {
    if (!r.fits) continue;
    lines[r.cluster + " (" + r.strategy + ")"].push_back(&r);
    gmin = gmin == 0 ? r.gpus : std::min(gmin, r.gpus);
    gmax = std::max(gmax, r.gpus);
    ymax = std::max(ymax, r.plan.tokens_per_s / static_cast<double>(r.gpus));
  }
  ymax = nice_max(ymax);
  const double lx0 = std::log2(static_cast<double>(std::max<int64_t>(gmin, 1)));
  const double lx1 = std::max(lx0 + 1, std::log2(static_cast<double>(std::max<int64_t>(gmax, 1))));
  const auto x = [&](int64_t g) {
    return kLeft + (std::log2(static_cast<double>(g)) - lx0) / (lx1 - lx0) * (kW - kLeft - kRight);
  };
  const auto y = [&](double v) { return kTop + (1 - v / ymax) * (kH - kTop - kBottom); };
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kW << "\" height=\"" << kH
    << "\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << kLeft << "\" y=\"30\" font-size=\"16\">" << escape_xml(title) << "</text>\n"
    << "<text x=\"" << kLeft << "\" y=\"50\" font-size=\"12\" fill=\"#555\">tokens/s per GPU "
    << "against GPUs; each point labelled with its scaling efficiency and MFU</text>\n";
  for (int k = 0; k <= 4; ++k) {
    const double v = ymax * k / 4;
    s << "<line x1=\"" << kLeft << "\" x2=\"" << kW - kRight << "\" y1=\"" << y(v) << "\" y2=\""
      << y(v) << "\" stroke=\"#ddd\"/>\n<text x=\"" << kLeft - 8 << "\" y=\"" << y(v) + 4
      << "\" font-size=\"11\" text-anchor=\"end\">" << with_commas(std::llround(v)) << "</text>\n";
  }
  std::vector<int64_t> ticks;
  for (const SweepRow& r : rows) {
    if (std::find(ticks.begin(), ticks.end(), r.gpus) == ticks.end()) ticks.push_back(r.gpus);
  }
  for (const int64_t g : ticks) {
    s << "<text x=\"" << x(g) << "\" y=\"" << kH - kBottom + 18
      << "\" font-size=\"11\" text-anchor=\"middle\">" << with_commas(g) << "</text>\n";
  }
  s << "<text x=\"" << (kLeft + kW - kRight) / 2 << "\" y=\"" << kH - 25
    << "\" font-size=\"12\" text-anchor=\"middle\">GPUs</text>\n";
  static constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                            "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"};
  size_t i = 0;
  for (const auto& [name, points] : lines) {
    const char* color = kColors[i % std::size(kColors)];
    std::ostringstream path;
    for (const SweepRow* r : points) {
      path << (path.tellp() == 0 ? "" : " ") << x(r->gpus) << ","
           << y(r->plan.tokens_per_s / static_cast<double>(r->gpus));
    }
    s << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" points=\""
      << path.str() << "\"/>\n";
    for (const SweepRow* r : points) {
      const double v = r->plan.tokens_per_s / static_cast<double>(r->gpus);
      s << "<circle cx=\"" << x(r->gpus) << "\" cy=\"" << y(v) << "\" r=\"4\" fill=\"" << color
        << "\"/>\n<text x=\"" << x(r->gpus) + 6 << "\" y=\"" << y(v) - 6
        << "\" font-size=\"10\" fill=\"" << color << "\">" << fixed(100 * r->scaling, 0)
        << "%, MFU " << fixed(100 * r->plan.mfu, 0) << "%</text>\n";
    }
    s << "<rect x=\"" << kW - kRight + 20 << "\" y=\"" << kTop + 20 * i << "\" width=\"12\" "
      << "height=\"12\" fill=\"" << color << "\"/>\n<text x=\"" << kW - kRight + 38 << "\" y=\""
      << kTop + 20 * i + 10 << "\" font-size=\"12\">" << escape_xml(name) << "</text>\n";
    ++i;
  }
  s << "</svg>\n";
  return s.str();
}

}  // namespace

double cost_per_million_tokens(double price, int64_t gpus, double tokens_per_s) {
  return price * static_cast<double>(gpus) / 3600.0 / tokens_per_s * 1e6;
}

void run_compare_sweep(CliContext& ctx, const PlanArgs& a, const SweepOptions& o) {
  if (!o.svg.empty()) check_output_path(o.svg, "--svg");
  const std::string list = o.strategies.empty() ? "auto" : o.strategies;
  std::vector<SweepRow> rows;
  for (const std::string& cluster : a.clusters) {
    for (const int64_t gpus : a.gpus_list) {
      PlanArgs b = a;
      b.where.cluster = cluster;
      b.where.gpus = gpus;
      std::unique_ptr<planner::Planner> p;
      std::vector<planner::Strategy> strategies = planner::parse_strategies(list);
      try {
        p = b.planner();
      } catch (const Error& e) {
        // A count the cluster cannot hold (more GPUs than one machine without a network has, more
        // ranks than shardplan plans for): a row that says so, not the end.
        for (const planner::Strategy& s : strategies) {
          SweepRow r;
          r.cluster = cluster;
          r.strategy = s.name;
          r.gpus = gpus;
          r.reason = e.what();
          rows.push_back(std::move(r));
        }
        continue;
      }
      std::vector<std::function<bool(const planner::ParallelConfig&)>> filters;
      for (const planner::Strategy& s : strategies) filters.push_back(s.keep);
      const std::vector<planner::Planner::Best> best = p->best_of_each(b.pins(), filters, nullptr);
      const collectives::Cluster& c = p->cluster();
      for (size_t i = 0; i < strategies.size(); ++i) {
        SweepRow r;
        r.cluster = cluster;
        r.accelerator = c.accelerator.model;
        r.strategy = strategies[i].name;
        r.gpus = gpus;
        if (o.price) {
          r.price = o.price;
          r.price_source = "--price-per-gpu-hour";
        } else if (c.price_per_gpu_hour_usd) {
          r.price = c.price_per_gpu_hour_usd->value;
          r.price_source = c.price_per_gpu_hour_usd->source;
        }
        if (best[i].best) {
          r.fits = true;
          r.plan = *best[i].best;
          r.view = planner::plan_view_json(*p, r.plan);
        } else {
          r.reason = best[i].evaluated == 0 ? "no configuration of this strategy is possible (" +
                                                  strategies[i].needs + ")"
                                            : "nothing fits in memory";
        }
        rows.push_back(std::move(r));
      }
    }
  }
  // Scaling efficiency: tokens/s per GPU against the same cluster and strategy's smallest count
  // that fits.
  for (SweepRow& r : rows) {
    if (!r.fits) continue;
    for (const SweepRow& base : rows) {
      if (base.fits && base.cluster == r.cluster && base.strategy == r.strategy) {
        r.scaling = (r.plan.tokens_per_s / static_cast<double>(r.gpus)) /
                    (base.plan.tokens_per_s / static_cast<double>(base.gpus));
        break;
      }
    }
  }
  const std::string title = a.model + ", seq " + std::to_string(a.seq) + ", global batch " +
                            std::to_string(a.global_batch) + " (" + a.precision + ")";
  if (!o.svg.empty()) write_file_atomically(o.svg, sweep_chart_svg(rows, title), "--svg");
  const bool none_fits =
      std::none_of(rows.begin(), rows.end(), [](const SweepRow& r) { return r.fits; });
  if (none_fits) ctx.exit_code = ExitCode::kNothingFits;
  if (ctx.json) {
    nlohmann::ordered_json j;
    j["setup"] = {{"model", a.model},  {"clusters", a.clusters},         {"gpus", a.gpus_list},
                  {"seq", a.seq},      {"global_batch", a.global_batch}, {"precision", a.precision},
                  {"tokens", o.tokens}};
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const SweepRow& r : rows) {
      nlohmann::ordered_json row = {{"cluster", r.cluster},
                                    {"accelerator", r.accelerator},
                                    {"gpus", r.gpus},
                                    {"strategy", r.strategy},
                                    {"fits", r.fits}};
      if (!r.fits) {
        row["reason"] = r.reason;
        out.push_back(row);
        continue;
      }
      for (auto it = r.view.begin(); it != r.view.end(); ++it) row[it.key()] = it.value();
      row["tokens_per_s_per_gpu"] = r.plan.tokens_per_s / static_cast<double>(r.gpus);
      row["scaling_efficiency"] = r.scaling;
      if (r.price) {
        row["price_per_gpu_hour_usd"] = *r.price;
        row["price_source"] = r.price_source;
        row["cost_per_million_tokens"] =
            cost_per_million_tokens(*r.price, r.gpus, r.plan.tokens_per_s);
      }
      if (o.tokens > 0) {
        const double seconds = static_cast<double>(o.tokens) / r.plan.tokens_per_s;
        row["days_to_train"] = seconds / 86400;
        if (r.price)
          row["cost_to_train_usd"] = *r.price * static_cast<double>(r.gpus) * seconds / 3600;
      }
      out.push_back(row);
    }
    j["rows"] = out;
    print_json_document(j);
    return;
  }
  std::cout << title << " across " << a.clusters.size() << " cluster(s) x " << a.gpus_list.size()
            << " GPU count(s)";
  if (o.tokens > 0) std::cout << ", to train " << with_commas(o.tokens) << " tokens";
  std::cout << ":\n";
  std::vector<std::vector<std::string>> table;
  for (const SweepRow& r : rows) {
    if (!r.fits) {
      table.push_back({r.cluster, with_commas(r.gpus), r.strategy, "does not fit: " + r.reason, "",
                       "", "", "", "", "", "", ""});
      continue;
    }
    const double per_gpu = r.plan.tokens_per_s / static_cast<double>(r.gpus);
    std::vector<std::string> cells = {
        r.cluster,
        with_commas(r.gpus),
        r.strategy,
        config_text(r.plan.config),
        fixed(r.plan.step_time_s, 2) + " s",
        with_commas(std::llround(r.plan.tokens_per_s)),
        with_commas(std::llround(per_gpu)),
        fixed(100 * r.plan.mfu, 1) + "%",
        human_bytes(static_cast<double>(r.plan.memory_bytes)),
        fixed(100 * r.scaling, 0) + "%",
        r.price ? "$" + fixed(cost_per_million_tokens(*r.price, r.gpus, r.plan.tokens_per_s), 3)
                : "-"};
    if (o.tokens > 0) {
      const double seconds = static_cast<double>(o.tokens) / r.plan.tokens_per_s;
      cells.push_back(fixed(seconds / 86400, 1) +
                      (r.price
                           ? " d, $" + with_commas(std::llround(
                                           *r.price * static_cast<double>(r.gpus) * seconds / 3600))
                           : " d"));
    } else {
      cells.push_back("-");
    }
    table.push_back(cells);
  }
  print_table(
      {"cluster", "GPUs", "strategy", "best configuration", "step", "tokens/s", "tokens/s/GPU",
       "MFU", "memory/GPU", "scaling", "$/M tokens", o.tokens > 0 ? "to train" : "budget"},
      table, {false, true, false, false, true, true, true, true, true, true, true, true});
  for (const SweepRow& r : rows) {
    if (r.price && r.price_source != "--price-per-gpu-hour") {
      std::cout << "price of " << r.cluster << ": $" << fixed(*r.price, 2) << "/GPU-hour ("
                << r.price_source << ")\n";
      break;
    }
  }
  if (!o.svg.empty()) std::cout << "wrote " << o.svg << "\n";
}

}  // namespace shardplan::cli
