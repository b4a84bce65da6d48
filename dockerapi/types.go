package dockerapi

import "encoding/json"

// The types below mirror the engine's JSON. Go names equal the wire names;
// tags appear only for exceptions. They declare what waitdaemon reads or
// must carry from one container to another; nested structures it never
// looks into are carried as raw JSON.

// Container is the answer to GET /containers/{id}/json.
type Container struct {
	ID              string `json:"Id"`
	Created         string
	Path            string   // the command's executable, as run
	Args            []string // its arguments
	Name            string
	Image           string // the image ID
	State           ContainerState
	Config          Config
	HostConfig      HostConfig
	NetworkSettings NetworkSettings
	GraphDriver     GraphDriver
}

// GraphDriver is Container.GraphDriver: the storage of its root file
// system; with overlay2, Data's UpperDir is its own writable layer.
type GraphDriver struct {
	Name string
	Data map[string]string
}

// ContainerState is Container.State.
type ContainerState struct {
	Status     string
	Running    bool
	Pid        int
	ExitCode   int
	Error      string
	StartedAt  string
	FinishedAt string
}

// Config is a container's configuration, as inspect shows it and as
// create takes it (at the top level of the create body).
type Config struct {
	Hostname     string              `json:",omitempty"`
	Domainname   string              `json:",omitempty"`
	User         string              `json:",omitempty"`
	AttachStdin  bool                `json:",omitempty"`
	AttachStdout bool                `json:",omitempty"`
	AttachStderr bool                `json:",omitempty"`
	ExposedPorts map[string]struct{} `json:",omitempty"`
	Tty          bool                `json:",omitempty"`
	OpenStdin    bool                `json:",omitempty"`
	StdinOnce    bool                `json:",omitempty"`
	Env          []string            `json:",omitempty"`
	Cmd          []string            `json:",omitempty"`
	Healthcheck  *HealthConfig       `json:",omitempty"`
	Image        string              `json:",omitempty"`
	Volumes      map[string]struct{} `json:",omitempty"`
	WorkingDir   string              `json:",omitempty"`
	Entrypoint   []string            `json:",omitempty"`
	MacAddress   string              `json:",omitempty"`
	Labels       map[string]string   `json:",omitempty"`
	StopSignal   string              `json:",omitempty"`
	StopTimeout  *int                `json:",omitempty"`
}

// HealthConfig is Config.Healthcheck.
type HealthConfig struct {
	Test          []string `json:",omitempty"`
	Interval      int64    `json:",omitempty"`
	Timeout       int64    `json:",omitempty"`
	StartPeriod   int64    `json:",omitempty"`
	StartInterval int64    `json:",omitempty"`
	Retries       int      `json:",omitempty"`
}

// HostConfig is a container's host configuration, as inspect shows it and
// as create takes it. MaskedPaths and ReadonlyPaths keep null apart from
// []: the engine fills its defaults only for null.
type HostConfig struct {
	Binds           []string          `json:",omitempty"`
	ContainerIDFile string            `json:",omitempty"`
	LogConfig       *LogConfig        `json:",omitempty"`
	NetworkMode     string            `json:",omitempty"`
	PortBindings    json.RawMessage   `json:",omitempty"`
	RestartPolicy   *RestartPolicy    `json:",omitempty"`
	AutoRemove      bool              `json:",omitempty"`
	VolumeDriver    string            `json:",omitempty"`
	VolumesFrom     []string          `json:",omitempty"`
	CapAdd          []string          `json:",omitempty"`
	CapDrop         []string          `json:",omitempty"`
	CgroupnsMode    string            `json:",omitempty"`
	Dns             []string          `json:",omitempty"`
	DnsOptions      []string          `json:",omitempty"`
	DnsSearch       []string          `json:",omitempty"`
	ExtraHosts      []string          `json:",omitempty"`
	GroupAdd        []string          `json:",omitempty"`
	IpcMode         string            `json:",omitempty"`
	Cgroup          string            `json:",omitempty"`
	Links           []string          `json:",omitempty"`
	OomScoreAdj     int               `json:",omitempty"`
	PidMode         string            `json:",omitempty"`
	Privileged      bool              `json:",omitempty"`
	PublishAllPorts bool              `json:",omitempty"`
	ReadonlyRootfs  bool              `json:",omitempty"`
	SecurityOpt     []string          `json:",omitempty"`
	StorageOpt      map[string]string `json:",omitempty"`
	Tmpfs           map[string]string `json:",omitempty"`
	UTSMode         string            `json:",omitempty"`
	UsernsMode      string            `json:",omitempty"`
	ShmSize         int64             `json:",omitempty"`
	Sysctls         map[string]string `json:",omitempty"`
	Runtime         string            `json:",omitempty"`
	Annotations     map[string]string `json:",omitempty"`

	// Resources.
	CpuShares            int64             `json:",omitempty"`
	Memory               int64             `json:",omitempty"`
	NanoCpus             int64             `json:",omitempty"`
	CgroupParent         string            `json:",omitempty"`
	BlkioWeight          uint16            `json:",omitempty"`
	BlkioWeightDevice    []json.RawMessage `json:",omitempty"`
	BlkioDeviceReadBps   []json.RawMessage `json:",omitempty"`
	BlkioDeviceWriteBps  []json.RawMessage `json:",omitempty"`
	BlkioDeviceReadIOps  []json.RawMessage `json:",omitempty"`
	BlkioDeviceWriteIOps []json.RawMessage `json:",omitempty"`
	CpuPeriod            int64             `json:",omitempty"`
	CpuQuota             int64             `json:",omitempty"`
	CpuRealtimePeriod    int64             `json:",omitempty"`
	CpuRealtimeRuntime   int64             `json:",omitempty"`
	CpusetCpus           string            `json:",omitempty"`
	CpusetMems           string            `json:",omitempty"`
	Devices              []DeviceMapping   `json:",omitempty"`
	DeviceCgroupRules    []string          `json:",omitempty"`
	DeviceRequests       []json.RawMessage `json:",omitempty"`
	MemoryReservation    int64             `json:",omitempty"`
	MemorySwap           int64             `json:",omitempty"`
	MemorySwappiness     *int64            `json:",omitempty"`
	OomKillDisable       *bool             `json:",omitempty"`
	PidsLimit            *int64            `json:",omitempty"`
	Ulimits              []Ulimit          `json:",omitempty"`

	Mounts        []Mount  `json:",omitempty"`
	MaskedPaths   []string // null: the engine's defaults
	ReadonlyPaths []string // null: the engine's defaults
	Init          *bool    `json:",omitempty"`
}

// LogConfig is HostConfig.LogConfig.
type LogConfig struct {
	Type   string            `json:",omitempty"`
	Config map[string]string `json:",omitempty"`
}

// RestartPolicy is HostConfig.RestartPolicy.
type RestartPolicy struct {
	Name              string `json:",omitempty"`
	MaximumRetryCount int    `json:",omitempty"`
}

// DeviceMapping is one of HostConfig.Devices.
type DeviceMapping struct {
	PathOnHost        string
	PathInContainer   string
	CgroupPermissions string
}

// Ulimit is one of HostConfig.Ulimits.
type Ulimit struct {
	Name string
	Soft int64
	Hard int64
}

// Mount is one of HostConfig.Mounts (API 1.25 and later).
type Mount struct {
	Type          string          `json:",omitempty"`
	Source        string          `json:",omitempty"`
	Target        string          `json:",omitempty"`
	ReadOnly      bool            `json:",omitempty"`
	Consistency   string          `json:",omitempty"`
	BindOptions   json.RawMessage `json:",omitempty"`
	VolumeOptions json.RawMessage `json:",omitempty"`
	TmpfsOptions  json.RawMessage `json:",omitempty"`
}

// NetworkSettings is Container.NetworkSettings; only the endpoints matter.
type NetworkSettings struct {
	Networks map[string]EndpointSettings
}

// EndpointSettings is one network of a container. Inspect fills the
// runtime fields; create takes the configuration ones.
type EndpointSettings struct {
	IPAMConfig json.RawMessage   `json:",omitempty"`
	Links      []string          `json:",omitempty"`
	Aliases    []string          `json:",omitempty"`
	DriverOpts map[string]string `json:",omitempty"`
	// Runtime data, never sent back.
	NetworkID  string `json:",omitempty"`
	EndpointID string `json:",omitempty"`
	Gateway    string `json:",omitempty"`
	IPAddress  string `json:",omitempty"`
	MacAddress string `json:",omitempty"`
}

// CreateRequest is the body of POST /containers/create: Config at the top
// level, plus HostConfig and NetworkingConfig.
type CreateRequest struct {
	Config
	HostConfig       HostConfig
	NetworkingConfig *NetworkingConfig `json:",omitempty"`
}

// NetworkingConfig is CreateRequest.NetworkingConfig.
type NetworkingConfig struct {
	EndpointsConfig map[string]EndpointSettings
}

// CreateResponse is the answer to POST /containers/create.
type CreateResponse struct {
	ID       string `json:"Id"`
	Warnings []string
}

// ContainerSummary is one entry of GET /containers/json.
type ContainerSummary struct {
	ID     string `json:"Id"`
	Names  []string
	Image  string
	State  string
	Status string
	Labels map[string]string
}

// WaitResponse is the answer to POST /containers/{id}/wait.
type WaitResponse struct {
	StatusCode int
	Error      *struct{ Message string }
}

// Image is the answer to GET /images/{name}/json. Engines from API 1.50
// leave empty Config fields out; missing means empty.
type Image struct {
	ID          string `json:"Id"`
	RepoTags    []string
	RepoDigests []string
	Config      *Config
	Size        int64
}

// VersionInfo is the answer to GET /version.
type VersionInfo struct {
	Version       string
	APIVersion    string `json:"ApiVersion"`
	MinAPIVersion string `json:"MinAPIVersion"`
	Os            string
	Arch          string
}
