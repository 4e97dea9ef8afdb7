// Package version reports the build's version. The variables are stamped at
// link time, e.g.
//
//	go build -ldflags "-X github.com/tidal-autoscaler/tidal/internal/version.Version=v0.1.0 \
//	  -X github.com/tidal-autoscaler/tidal/internal/version.GitCommit=$(git rev-parse HEAD) \
//	  -X github.com/tidal-autoscaler/tidal/internal/version.BuildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)" ./cmd/tidal
package version

import (
	"fmt"
	"runtime"
)

// Set by -ldflags -X; the defaults mark a build that was not stamped.
var (
	Version   = "v0.0.0-dev"
	GitCommit = "unknown"
	BuildDate = "unknown"
)

// Info describes the running binary.
type Info struct {
	Version   string `json:"version"`
	GitCommit string `json:"gitCommit"`
	BuildDate string `json:"buildDate"`
	GoVersion string `json:"goVersion"`
	Compiler  string `json:"compiler"`
	Platform  string `json:"platform"`
}

// Get returns the version information of this binary.
func Get() Info {
	return Info{
		Version:   Version,
		GitCommit: GitCommit,
		BuildDate: BuildDate,
		GoVersion: runtime.Version(),
		Compiler:  runtime.Compiler,
		Platform:  fmt.Sprintf("%s/%s", runtime.GOOS, runtime.GOARCH),
	}
}

// String renders the information on one line, for humans and logs.
func (i Info) String() string {
	return fmt.Sprintf("tidal %s (commit %s, built %s, %s %s)",
		i.Version, i.GitCommit, i.BuildDate, i.GoVersion, i.Platform)
}
