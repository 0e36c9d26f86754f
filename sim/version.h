// Tool version and git SHA of the build, for the provenance block of every report.
#pragma once

namespace tpo {
const char* tool_version();
const char* git_sha();
}  // namespace tpo
