// Package version holds the build's version, set with -ldflags -X.
package version

// Set at build time by the Makefile.
var (
	Version   = "v0.0.0-dev"
	GitCommit = "unknown"
)
