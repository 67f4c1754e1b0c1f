#include "planner/cli/compare_chart.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <iomanip>
#include <sstream>

namespace shardplan::cli {
namespace {

constexpr int kWidth = 1000;
constexpr int kRowHeight = 46;  // the bar, then its configuration and MFU
constexpr int kLabelWidth = 90;
constexpr int kPanelWidth = 380;
constexpr int kGap = 60;
constexpr int kTop = 80;
constexpr int kValueLabelWidth = 34;  // a bar's value at font size 11 ("123.4")

std::string num(double x) {
  std::ostringstream os;
  os << std::setprecision(3) << x;
  return os.str();
}

}  // namespace

std::string escape_xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

double nice_max(double x) {
  if (x <= 0) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(x)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= x) return m * p;
  }
  return 10 * p;
}

std::string compare_chart_svg(const std::vector<ChartRow>& rows, double capacity_bytes,
                              const std::string& title) {
  const int n = static_cast<int>(rows.size());
  const int height = kTop + n * kRowHeight + 90;
  double tmax = 0, mmax = capacity_bytes;
  for (const ChartRow& r : rows) {
    if (!r.fits) continue;
    tmax = std::max(tmax, r.step_time_s);
    mmax = std::max(mmax, static_cast<double>(r.memory_bytes));
  }
  tmax = nice_max(tmax);
  const double gib = 1024.0 * 1024 * 1024;
  const double mmax_gib = nice_max(mmax / gib);
  const int x1 = kLabelWidth + 10;         // step-time panel
  const int x2 = x1 + kPanelWidth + kGap;  // memory panel
  const double capacity_x = x2 + capacity_bytes / gib / mmax_gib * kPanelWidth;
  std::ostringstream s;
  s << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << height
    << "\" viewBox=\"0 0 " << kWidth << " " << height
    << "\" font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"13\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << kWidth / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"16\">"
    << escape_xml(title) << "</text>\n"
    << "<text x=\"" << x1 + kPanelWidth / 2
    << "\" y=\"52\" text-anchor=\"middle\">Step time (s)</text>\n"
    << "<text x=\"" << x2 + kPanelWidth / 2
    << "\" y=\"52\" text-anchor=\"middle\">Memory per GPU (GiB)</text>\n";
  // One colour per bill time part (planner::time_parts order).
  const char* colors[] = {"#4e79a7", "#e15759", "#f28e2b", "#b07aa1", "#76b7b2", "#edc948"};
  for (int i = 0; i < n; ++i) {
    const ChartRow& r = rows[static_cast<size_t>(i)];
    const int y = kTop + i * kRowHeight;
    s << "<text x=\"" << kLabelWidth << "\" y=\"" << y + 17 << "\" text-anchor=\"end\">"
      << escape_xml(r.strategy) << "</text>\n";
    if (!r.fits) {
      s << "<text x=\"" << x1 + 4 << "\" y=\"" << y + 17
        << "\" fill=\"#888\">does not fit</text>\n";
      continue;
    }
    // The bill's time parts add up to the step time (planner::time_parts).
    const std::array<planner::BillTimePart, planner::kBillTimeParts> parts =
        planner::time_parts(r.bill);
    double x = x1;
    for (size_t k = 0; k < parts.size(); ++k) {
      const double w = parts[k].seconds / tmax * kPanelWidth;
      if (w > 0) {
        s << "<rect x=\"" << x << "\" y=\"" << y + 4 << "\" width=\"" << w
          << "\" height=\"20\" fill=\"" << colors[k] << "\"><title>" << parts[k].name << ": "
          << num(parts[k].seconds) << " s</title></rect>\n";
      }
      x += w;
    }
    s << "<text x=\"" << x + 4 << "\" y=\"" << y + 18 << "\" font-size=\"11\">"
      << num(r.step_time_s) << " s</text>\n";
    if (!r.detail.empty()) {
      s << "<text x=\"" << x1 << "\" y=\"" << y + 37 << "\" font-size=\"10\" fill=\"#555\">"
        << escape_xml(r.detail) << "</text>\n";
    }
    const double mw = static_cast<double>(r.memory_bytes) / gib / mmax_gib * kPanelWidth;
    const bool over = static_cast<double>(r.memory_bytes) > capacity_bytes;
    // A plan filling memory ends at the capacity line: its label goes past the line, not on it.
    double label_x = x2 + mw + 4;
    if (label_x - 2 < capacity_x && label_x + kValueLabelWidth > capacity_x) {
      label_x = capacity_x + 4;
    }
    s << "<rect x=\"" << x2 << "\" y=\"" << y + 4 << "\" width=\"" << mw
      << "\" height=\"20\" fill=\"" << (over ? "#e15759" : "#59a14f") << "\"/>\n"
      << "<text x=\"" << label_x << "\" y=\"" << y + 18 << "\" font-size=\"11\">"
      << num(static_cast<double>(r.memory_bytes) / gib) << "</text>\n";
  }
  // Axes with ticks and units.
  const int ybase = kTop + n * kRowHeight + 4;
  for (int panel = 0; panel < 2; ++panel) {
    const int x0 = panel == 0 ? x1 : x2;
    const double vmax = panel == 0 ? tmax : mmax_gib;
    s << "<line x1=\"" << x0 << "\" y1=\"" << kTop << "\" x2=\"" << x0 << "\" y2=\"" << ybase
      << "\" stroke=\"black\"/>\n"
      << "<line x1=\"" << x0 << "\" y1=\"" << ybase << "\" x2=\"" << x0 + kPanelWidth << "\" y2=\""
      << ybase << "\" stroke=\"black\"/>\n";
    for (int t = 0; t <= 4; ++t) {
      const double tx = x0 + kPanelWidth * t / 4.0;
      s << "<line x1=\"" << tx << "\" y1=\"" << ybase << "\" x2=\"" << tx << "\" y2=\"" << ybase + 5
        << "\" stroke=\"black\"/>\n"
        << "<text x=\"" << tx << "\" y=\"" << ybase + 19 << "\" text-anchor=\"middle\" "
        << "font-size=\"11\">" << num(vmax * t / 4.0) << (panel == 0 ? " s" : " GiB")
        << "</text>\n";
    }
  }
  const double cx = capacity_x;
  s << "<line x1=\"" << cx << "\" y1=\"" << kTop - 6 << "\" x2=\"" << cx << "\" y2=\"" << ybase
    << "\" stroke=\"#333\" stroke-dasharray=\"5,4\"/>\n"
    << "<text x=\"" << cx << "\" y=\"" << kTop - 10
    << "\" text-anchor=\"middle\" font-size=\"11\">capacity " << num(capacity_bytes / gib)
    << " GiB</text>\n";
  // Legend.
  const int ly = ybase + 44;
  int lx = x1;
  const std::array<planner::BillTimePart, planner::kBillTimeParts> legend =
      planner::time_parts(planner::Bill{});
  for (size_t k = 0; k < legend.size(); ++k) {
    std::string name(legend[k].name);
    std::replace(name.begin(), name.end(), '_', ' ');
    s << "<rect x=\"" << lx << "\" y=\"" << ly - 11 << "\" width=\"12\" height=\"12\" fill=\""
      << colors[k] << "\"/>\n<text x=\"" << lx + 16 << "\" y=\"" << ly << "\" font-size=\"12\">"
      << name << "</text>\n";
    lx += 40 + static_cast<int>(name.size()) * 7;
  }
  s << "</svg>\n";
  return s.str();
}

}  // namespace shardplan::cli
