// compare's report.html as a reader's browser shows it: headless Chromium (Debian's
// chromium-headless-shell, which scripts/setup installs) renders a real report — charts, heatmaps
// and tables of a small grid with eval texts and a task — at 1280 and 1920 px wide; a screenshot
// has the window's size, and a script run in the page finds every chart inside the window, drawn,
// and the page no wider than the window (tables scroll inside their own box). A report with a task
// full never gets right (the tiny model's pass keys) draws no chart for it; copy's log-probability
// always does.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/cli/compare_command.h"
#include "tests/support/golden.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

namespace fs = std::filesystem;

std::string browser() {
  for (const char* name : {"chromium-headless-shell", "chromium"}) {
    const std::string path = std::string("/usr/bin/") + name;
    if (fs::exists(path)) return path;
  }
  return "";
}

// Runs `command`, returning its standard output.
std::string output_of(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) out.append(buffer.data(), n);
  ::pclose(pipe);
  return out;
}

// The width and height in a PNG's header (IHDR, big-endian, at bytes 16-23).
std::pair<int, int> png_size(const fs::path& png) {
  const std::string bytes = test::read_file(png);
  if (bytes.size() < 24 || bytes.compare(1, 3, "PNG") != 0) return {0, 0};
  const auto be32 = [&](std::size_t at) {
    int v = 0;
    for (std::size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<unsigned char>(bytes[at + i]);
    return v;
  };
  return {be32(16), be32(20)};
}

// What the page's own layout says once loaded, as attributes of <body> in the dumped DOM.
constexpr const char* kLayoutProbe = R"(<script>
window.addEventListener('load', () => {
  const width = document.documentElement.clientWidth;
  const images = [...document.querySelectorAll('img')];
  const outside = images.filter(i => i.getBoundingClientRect().left < 0 ||
                                     i.getBoundingClientRect().right > width + 0.5);
  const undrawn = images.filter(i => !i.complete || i.naturalWidth === 0);
  document.body.setAttribute('data-images', String(images.length));
  document.body.setAttribute('data-outside', String(outside.length));
  document.body.setAttribute('data-undrawn', String(undrawn.length));
  document.body.setAttribute('data-page-width', String(document.documentElement.scrollWidth));
});
</script>)";

// The integer value of `name="..."` in the dumped DOM, or -1 when it is not there.
int attribute(const std::string& dom, const std::string& name) {
  const std::string key = name + "=\"";
  const std::size_t at = dom.find(key);
  if (at == std::string::npos) return -1;
  const std::size_t begin = at + key.size();
  const std::size_t end = dom.find('"', begin);
  if (end == std::string::npos || end == begin) return -1;
  return std::stoi(dom.substr(begin, end - begin));
}

TEST(ReportPage, EveryChartFitsAndIsDrawnAt1280And1920PixelsWide) {
  const std::string chromium = browser();
  if (chromium.empty()) GTEST_SKIP() << "no headless Chromium: run scripts/setup";
  if (std::system("/usr/bin/python3 -c 'import matplotlib' > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3-matplotlib is not installed: run scripts/setup";
  }
  const fs::path model = test::trained_model_dir();
  if (!fs::exists(model)) GTEST_SKIP() << "no " << model;
  test::TempDir dir;
  cli::CompareCommandOptions options;
  options.common.model = model.string();
  options.common.device = "cpu";
  options.policies = {"h2o", "local", "streaming"};
  options.budgets = {0.25, 0.5};
  options.batch = 2;
  options.prompt_len = 16;
  options.gen_len = 4;
  // Perplexity and agreement charts from eval texts, the copy task's chart and heatmaps.
  const auto eval = dir.path() / "eval.jsonl";
  std::string lines;
  for (const ScoreRequest& r : test::golden_score_requests()) {
    lines += nlohmann::json({{"token_ids", r.tokens}}).dump() + "\n";
  }
  test::write_file(eval, lines);
  options.eval = eval.string();
  options.prefill_tokens = 3;
  options.prompt_tokens = 4;
  options.generated_tokens = 4;
  options.tasks = {"copy"};
  options.task_text = (model / "eval.jsonl").string();
  options.task_lengths = {128, 200};
  options.task_depths = {0.1, 0.9};
  options.task_samples = 1;
  options.output = (dir.path() / "report").string();
  ASSERT_EQ(cli::run_compare(options), 0);

  std::string html = test::read_file(dir.path() / "report" / "report.html");
  const auto body_end = html.rfind("</body>");
  ASSERT_NE(body_end, std::string::npos);
  html.insert(body_end, kLayoutProbe);
  const auto page = dir.path() / "probed.html";
  test::write_file(page, html);

  const std::string flags = " --no-sandbox --disable-gpu --hide-scrollbars ";
  for (const int width : {1280, 1920}) {
    SCOPED_TRACE(testing::Message() << width << " px");
    const std::string size = std::to_string(width) + ",1600";
    const auto shot = dir.path() / ("report-" + std::to_string(width) + ".png");
    output_of(chromium + flags + "--window-size=" + size + " --screenshot=" + shot.string() +
              " file://" + page.string() + " 2>/dev/null");
    EXPECT_EQ(png_size(shot), (std::pair<int, int>{width, 1600}));

    const std::string dom = output_of(chromium + flags + "--window-size=" + size +
                                      " --virtual-time-budget=5000 --dump-dom file://" +
                                      page.string() + " 2>/dev/null");
    ASSERT_GT(attribute(dom, "data-images"), 3) << "the report has its charts and heatmaps";
    EXPECT_EQ(attribute(dom, "data-outside"), 0) << "a chart reaches past the window";
    EXPECT_EQ(attribute(dom, "data-undrawn"), 0) << "a chart did not load";
    EXPECT_LE(attribute(dom, "data-page-width"), width) << "the page scrolls sideways";
  }
}

}  // namespace
}  // namespace offgen
