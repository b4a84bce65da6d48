// Command recorder makes containers in containerd the way tink-agent's
// containerd runtime makes an action container (tinkerbell/tinkerbell
// tink/agent/internal/runtime/containerd, 2026-08): the same containerd
// client spec options in the same order, the same labels, ID and
// snapshot key. It only creates the container, unless -run is given, in
// which case it also runs it (unprivileged only, on these machines),
// copies its output to stdout and saves its snapshot's mounts.
//
// It lives in its own module so that waitdaemon's go.mod does not
// require the containerd client. See ../README.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/opencontainers/runtime-spec/specs-go"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var (
		address    = flag.String("address", "/run/containerd-test/containerd.sock", "containerd socket")
		namespace  = flag.String("namespace", "tinkerbell", "containerd namespace")
		id         = flag.String("id", "", "container ID (64 hex)")
		image      = flag.String("image", "", "action image, fully qualified")
		name       = flag.String("name", "", "action name")
		actionID   = flag.String("action-id", "", "action ID")
		pid        = flag.String("pid", "", "pid namespace: host or empty")
		network    = flag.String("network", "", "network namespace: host or empty")
		dnsDir     = flag.String("dns-dir", "", "directory holding resolv.conf, hosts and hostname")
		hostname   = flag.String("hostname", "", "the host's name, used with -network host")
		dataStore  = flag.String("data-store", "/var/lib/nerdctl/1935db59", "nerdctl data store")
		privileged = flag.Bool("privileged", true, "privileged, with all host devices")
		run        = flag.Bool("run", false, "run the container, copy its output to stdout, and write its snapshot's mounts to -mounts")
		mountsOut  = flag.String("mounts", "", "with -run: where to write the snapshot's mounts as JSON")
		configOf   = flag.Bool("config-of", false, "print -image's config blob, and make nothing")
		cmd        = flag.String("cmd", "", "the action's cmd, which replaces the image's ENTRYPOINT")
		env, vols  list
		args       list
	)
	flag.Var(&env, "env", "K=V, repeated")
	flag.Var(&vols, "volume", "src:dst[:opts], repeated")
	flag.Var(&args, "arg", "action argument, repeated")
	flag.Parse()

	ctx := namespaces.WithNamespace(context.Background(), *namespace)
	client, err := containerd.New(*address)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	img, err := client.GetImage(ctx, *image)
	if err != nil {
		log.Fatal(err)
	}
	if *configOf {
		if err := printConfig(ctx, img); err != nil {
			log.Fatal(err)
		}
		return
	}

	opts := []oci.SpecOpts{oci.WithImageConfig(img)}
	if *privileged {
		opts = append(opts, oci.WithPrivileged, oci.WithAllDevicesAllowed, oci.WithHostDevices)
	}
	opts = append(opts, oci.WithEnv(env))
	switch {
	case *cmd != "" && len(args) > 0:
		opts = append(opts, oci.WithProcessArgs(append([]string{*cmd}, args...)...))
	case *cmd != "":
		opts = append(opts, withEntrypoint(img, *cmd))
	case len(args) > 0:
		opts = append(opts, oci.WithImageConfigArgs(img, args))
	}
	if mounts := volumes(vols); len(mounts) > 0 {
		opts = append(opts, oci.WithMounts(mounts))
	}
	if *pid == "host" {
		opts = append(opts, oci.WithHostNamespace(specs.PIDNamespace))
	}
	hostNet := *network == "host"
	if hostNet {
		opts = append(opts, oci.WithHostNamespace(specs.NetworkNamespace))
	}
	for _, f := range []string{"resolv.conf", "hosts", "hostname"} {
		opts = append(opts, oci.WithMounts([]specs.Mount{{
			Destination: "/etc/" + f,
			Type:        "bind",
			Source:      filepath.Join(*dnsDir, f),
			Options:     []string{"bind", "rprivate", "rw"},
		}}))
	}
	host := (*id)[:12]
	if hostNet {
		host = *hostname
	}
	opts = append(opts, oci.WithHostname(host))

	display := "tinkerbell_" + *name + "_" + *actionID
	logDir := filepath.Join(*dataStore, "containers", *namespace, *id)
	labels := map[string]string{
		"nerdctl/namespace":  *namespace,
		"nerdctl/name":       display,
		"nerdctl/extraHosts": "[]",
		"nerdctl/hostname":   host,
		"nerdctl/log-uri":    "json-file://" + filepath.Join(logDir, *id+"-json.log"),
		"nerdctl/state-dir":  logDir,
	}
	key := display + "-" + (*id)[:8]
	c, err := client.NewContainer(ctx, *id,
		containerd.WithNewSnapshot(key, img),
		containerd.WithNewSpec(opts...),
		containerd.WithContainerLabels(labels))
	if err != nil {
		log.Fatal(err)
	}
	if !*run {
		if err := printRecord(ctx, client, *id); err != nil {
			log.Fatal(err)
		}
		return
	}
	if err := runTask(ctx, client, c, key, *mountsOut); err != nil {
		log.Fatal(err)
	}
}

// printRecord prints the container as containerd stores it (Containers/Get),
// without its timestamps, the spec as its type URL and JSON value.
func printRecord(ctx context.Context, client *containerd.Client, id string) error {
	c, err := client.ContainerService().Get(ctx, id)
	if err != nil {
		return err
	}
	record := map[string]any{
		"ID":          c.ID,
		"Labels":      c.Labels,
		"Image":       c.Image,
		"Runtime":     c.Runtime,
		"Snapshotter": c.Snapshotter,
		"SnapshotKey": c.SnapshotKey,
		"Spec": map[string]any{
			"type_url": c.Spec.GetTypeUrl(),
			"value":    json.RawMessage(c.Spec.GetValue()),
		},
	}
	js, err := json.MarshalIndent(record, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Printf("%s\n", js)
	return err
}

// printConfig prints the image's config blob from the content store.
func printConfig(ctx context.Context, img containerd.Image) error {
	desc, err := img.Config(ctx)
	if err != nil {
		return err
	}
	blob, err := content.ReadBlob(ctx, img.ContentStore(), desc)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(blob)
	return err
}

// withEntrypoint replaces the image's ENTRYPOINT with cmd and keeps its
// CMD, as the agent does for an action with a cmd and no args.
func withEntrypoint(img containerd.Image, cmd string) oci.SpecOpts {
	return func(ctx context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		cfg, err := img.Spec(ctx)
		if err != nil {
			return err
		}
		s.Process.Args = append([]string{cmd}, cfg.Config.Cmd...)
		return nil
	}
}

// volumes turns the action's volumes into rbind mounts, rw unless ro is
// given, as the agent does.
func volumes(vols []string) []specs.Mount {
	var out []specs.Mount
	for _, v := range vols {
		f := strings.SplitN(v, ":", 3)
		options := []string{"rbind", "rw"}
		if len(f) == 3 {
			options = []string{"rbind"}
			mode := "rw"
			for _, o := range strings.Split(f[2], ",") {
				switch o {
				case "ro", "rw":
					mode = o
				case "":
				default:
					options = append(options, o)
				}
			}
			options = append(options, mode)
		}
		out = append(out, specs.Mount{Type: "bind", Source: f[0], Destination: f[1], Options: options})
	}
	return out
}

func runTask(ctx context.Context, client *containerd.Client, c containerd.Container, key, mountsOut string) error {
	task, err := c.NewTask(ctx, cio.NewCreator(cio.WithStreams(nil, os.Stdout, os.Stderr)))
	if err != nil {
		return fmt.Errorf("creating task: %w", err)
	}
	defer task.Delete(ctx)
	status, err := task.Wait(ctx)
	if err != nil {
		return fmt.Errorf("waiting: %w", err)
	}
	if err := task.Start(ctx); err != nil {
		return fmt.Errorf("starting: %w", err)
	}
	st := <-status
	if code, _, err := st.Result(); err != nil || code != 0 {
		return fmt.Errorf("task exited %d: %v", code, err)
	}
	mounts, err := client.SnapshotService("overlayfs").Mounts(ctx, key)
	if err != nil {
		return fmt.Errorf("snapshot mounts: %w", err)
	}
	js, err := json.MarshalIndent(mounts, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(mountsOut, append(js, '\n'), 0o644)
}
