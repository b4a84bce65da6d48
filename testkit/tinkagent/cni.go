package tinkagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The agent's CNI paths (defaultCNIBinDir, defaultCNIConfDir).
const (
	CNIBinDir  = "/opt/cni/bin"
	CNIConfDir = "/etc/cni/net.d"
)

// fallbackConflist is the agent's bridge network when its conf dir has
// none (fallbackBridgeConflist): the values CaptainOS's
// /etc/cni/net.d/10-bridge.conflist ships.
const fallbackConflist = `{
  "cniVersion": "1.0.0",
  "name": "bridge",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "172.17.0.0/23", "gateway": "172.17.0.1"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "firewall", "ingressPolicy": "same-bridge"},
    {"type": "tuning"}
  ]
}`

// CNI is the network tink-agent's containerd runtime (v0.23.0 to HEAD,
// every release with that runtime) gives an action that is not on the
// host's network (namespaces.network: host, which v0.25.0 brought): one
// network list, whose plugins it runs by the CNI spec, each in turn on
// ADD and in reverse on DEL, with the result of the one before
// (go-cni's Setup and Remove, through libcni).
type CNI struct {
	// BinDir holds the plugins.
	BinDir string
	// Conflist is the network list, as JSON.
	Conflist []byte
	// Log gets a line for each setup and teardown, and their errors,
	// which the agent logs and goes on past.
	Log io.Writer
}

// LoadCNI is the network list the agent loads (gocni.WithDefaultConf):
// the first *.conflist of confDir by name, else the agent's fallback
// bridge; its plugins run from binDir.
func LoadCNI(confDir, binDir string) (*CNI, error) {
	n := &CNI{BinDir: binDir, Conflist: []byte(fallbackConflist)}
	files, _ := filepath.Glob(filepath.Join(confDir, "*.conflist"))
	slices.Sort(files)
	if len(files) > 0 {
		data, err := os.ReadFile(files[0])
		if err != nil {
			return nil, fmt.Errorf("CNI: %w", err)
		}
		n.Conflist = data
	}
	if _, err := n.list(); err != nil {
		return nil, err
	}
	return n, nil
}

type conflist struct {
	CNIVersion string            `json:"cniVersion"`
	Name       string            `json:"name"`
	Plugins    []json.RawMessage `json:"plugins"`
}

func (n *CNI) list() (conflist, error) {
	var l conflist
	if err := json.Unmarshal(n.Conflist, &l); err != nil {
		return l, fmt.Errorf("CNI: the network list: %w", err)
	}
	if l.Name == "" || len(l.Plugins) == 0 {
		return l, fmt.Errorf("CNI: the network list: want a name and plugins")
	}
	return l, nil
}

// Attachment is an action's place on the network: what Remove takes
// away.
type Attachment struct {
	ContainerID, NetNS string
	// Result is the chain's ADD result, the prevResult of each DEL.
	Result json.RawMessage
	// IP is the action's address, if the chain gave one.
	IP string
}

// cniIfName is the interface go-cni gives the first network: eth0.
const cniIfName = "eth0"

// Setup adds the container id, whose task's network namespace is netns
// (/proc/<pid>/ns/net), to the network. It returns the attachment even
// when a plugin failed, for Remove: the agent removes what it set up
// whatever the setup's end.
func (n *CNI) Setup(ctx context.Context, id, netns string) (*Attachment, error) {
	att := &Attachment{ContainerID: id, NetNS: netns}
	l, err := n.list()
	if err != nil {
		return att, err
	}
	start := time.Now()
	var prev json.RawMessage
	for _, p := range l.Plugins {
		out, err := n.exec(ctx, "ADD", l, p, id, netns, prev)
		if err != nil {
			n.logf("CNI: setting up %s on %s: %v", l.Name, id[:min(12, len(id))], err)
			return att, err
		}
		prev = out
		att.Result = out
	}
	var res struct {
		IPs []struct {
			Address string `json:"address"`
		} `json:"ips"`
	}
	if json.Unmarshal(att.Result, &res) == nil && len(res.IPs) > 0 {
		att.IP = res.IPs[0].Address
	}
	n.logf("CNI: %s set up on %s in %s: %s %s", l.Name, id[:min(12, len(id))], time.Since(start).Round(time.Millisecond), cniIfName, att.IP)
	return att, nil
}

// Remove takes att off the network: each plugin's DEL, last first, with
// the ADD's result as prevResult; the first error ends it, as libcni's
// DelNetworkList (the agent logs it and goes on).
func (n *CNI) Remove(ctx context.Context, att *Attachment) error {
	if att == nil {
		return nil
	}
	l, err := n.list()
	if err != nil {
		return err
	}
	start := time.Now()
	for i := len(l.Plugins) - 1; i >= 0; i-- {
		if _, err := n.exec(ctx, "DEL", l, l.Plugins[i], att.ContainerID, att.NetNS, att.Result); err != nil {
			n.logf("CNI: removing %s from %s: %v", l.Name, att.ContainerID[:min(12, len(att.ContainerID))], err)
			return err
		}
	}
	n.logf("CNI: %s removed from %s in %s", l.Name, att.ContainerID[:min(12, len(att.ContainerID))], time.Since(start).Round(time.Millisecond))
	return nil
}

// exec runs one plugin of l as the CNI spec says: its config on stdin,
// with the list's name and version and the previous result, and the
// command and container in CNI_* variables; its result on stdout.
func (n *CNI) exec(ctx context.Context, command string, l conflist, plugin json.RawMessage, id, netns string, prev json.RawMessage) (json.RawMessage, error) {
	var conf map[string]any
	if err := json.Unmarshal(plugin, &conf); err != nil {
		return nil, fmt.Errorf("a plugin's config: %w", err)
	}
	typ, _ := conf["type"].(string)
	if typ == "" || strings.ContainsRune(typ, '/') {
		return nil, fmt.Errorf("a plugin's config: type %q: want a plugin's name", typ)
	}
	conf["name"], conf["cniVersion"] = l.Name, l.CNIVersion
	if prev != nil {
		conf["prevResult"] = prev
	}
	stdin, err := json.Marshal(conf)
	if err != nil {
		return nil, err
	}
	env := append(os.Environ(), "CNI_COMMAND="+command, "CNI_CONTAINERID="+id, "CNI_NETNS="+netns,
		"CNI_IFNAME="+cniIfName, "CNI_PATH="+n.BinDir)
	var stdout, stderr bytes.Buffer
	if err := runPlugin(ctx, filepath.Join(n.BinDir, typ), env, stdin, &stdout, &stderr); err != nil {
		// The spec's error: {"code", "msg", "details"} on stdout.
		var e struct {
			Code    int    `json:"code"`
			Msg     string `json:"msg"`
			Details string `json:"details"`
		}
		if json.Unmarshal(stdout.Bytes(), &e) == nil && e.Msg != "" {
			return nil, fmt.Errorf("plugin %s %s: %s (code %d) %s", typ, command, e.Msg, e.Code, strings.TrimSpace(e.Details))
		}
		return nil, fmt.Errorf("plugin %s %s: %v: %s", typ, command, err, strings.TrimSpace(stdout.String()+" "+stderr.String()))
	}
	if command == "DEL" {
		return nil, nil
	}
	out := bytes.TrimSpace(stdout.Bytes())
	if !json.Valid(out) {
		return nil, fmt.Errorf("plugin %s %s: its result is no JSON: %q", typ, command, out)
	}
	return out, nil
}

func (n *CNI) logf(format string, a ...any) {
	if n.Log != nil {
		fmt.Fprintf(n.Log, "tinkagent: "+format+"\n", a...)
	}
}

// runPlugin runs the plugin at path as the CNI spec has it, with no
// shell: its config on stdin, its env, its stdout and stderr gathered.
// A ctx that ends kills it.
func runPlugin(ctx context.Context, path string, env []string, stdin []byte, stdout, stderr io.Writer) error {
	inR, inW, err := os.Pipe()
	if err != nil {
		return err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return err
	}
	p, err := os.StartProcess(path, []string{path}, &os.ProcAttr{Env: env, Files: []*os.File{inR, outW, errW}})
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return err
	}
	go func() {
		_, _ = inW.Write(stdin)
		inW.Close()
	}()
	read := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(stdout, outR); outR.Close(); read <- struct{}{} }()
	go func() { _, _ = io.Copy(stderr, errR); errR.Close(); read <- struct{}{} }()
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = p.Kill()
		case <-done:
		}
	}()
	state, err := p.Wait()
	close(done)
	<-read
	<-read
	if err != nil {
		return err
	}
	if !state.Success() {
		return fmt.Errorf("%s", state)
	}
	return nil
}
