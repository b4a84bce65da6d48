// The release's server side, as scripts/tinkerbell.sh builds it: these
// files are copied into each release's module copy, never built here. A
// module of its own, so that waitdaemon's ./... leaves them out.
module github.com/waitdaemon/waitdaemon/tools/tinkerbell

go 1.26
