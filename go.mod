module github.com/waitdaemon/waitdaemon

go 1.26.8

require (
	github.com/alecthomas/kong v1.17.0
	github.com/hashicorp/go-retryablehttp v0.7.8
	go.yaml.in/yaml/v3 v3.0.6
	google.golang.org/protobuf v1.36.10
)

require github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
