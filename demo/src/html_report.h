// --html FILE: the report as one self-contained page (inline CSS and SVG, no scripts, nothing
// fetched): the result table and charts drawn from the run's own numbers.
#pragma once

#include <iosfwd>

#include "demo_options.h"
#include "report.h"

namespace lockstep::demo {

void write_html(std::ostream& out, const Report& report, const DemoOptions& options);

}  // namespace lockstep::demo
