// Command waitdaemon is one Tinkerbell release's server side for one
// workflow, without Kubernetes: the workflow controller's render of a
// Template (its own text/template, yaml.v3 and validation, then
// YAMLToStatus) and the tink-server's gRPC handler
// (tink/server/internal/grpc.Handler, GetAction and ReportActionStatus)
// on a backend in memory that holds that one Workflow. The release's
// tink-agent, pointed at it with --grpc-server, runs the workflow as it
// would under that release's whole control plane.
//
// scripts/tinkerbell.sh copies this file into the release's
// tink/server/waitdaemon and builds it there, as tink-server beside
// tink-agent in $ENGINES_CACHE/tinkerbell-VERSION.
//
//	tink-server -template FILE [-listen 127.0.0.1:42113] [-id AGENT] [-exit] [-hold DURATION]
//	tink-server -template FILE -print
//
// FILE holds a template's action list, as the README writes one (a YAML
// list of actions): it becomes the one task of a Workflow for the agent
// AGENT. It prints JSON lines on stdout: the workflow's status as the
// controller stored it, each action as the handler served it, each
// report the agent made with the time it arrived, and the workflow's end
// once its last action has reported (a success) or an action failed or
// timed out; -exit then stops serving and exits 0. -hold keeps the agent
// waiting that long for the answer to each report of an action's end,
// its line printed first: what the agent removes before it reports is
// gone by the line, what it would remove after is still there until the
// answer. -listen's port 0 takes any; the "serving" line says which.
// -print serves nothing:
// it prints the status and the first action as the handler serves it,
// and exits.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	"github.com/tinkerbell/tinkerbell/pkg/data"
	"github.com/tinkerbell/tinkerbell/pkg/proto"
	"github.com/tinkerbell/tinkerbell/tink/controller/waitdaemon"
	grpcinternal "github.com/tinkerbell/tinkerbell/tink/server/internal/grpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

const (
	workflowName      = "waitdaemon"
	workflowNamespace = "tinkerbell"
)

func main() {
	template := flag.String("template", "", "a file holding a template's action list")
	listen := flag.String("listen", "127.0.0.1:42113", "the gRPC server's address:port")
	agentID := flag.String("id", "waitdaemon", "the agent's ID (tink-agent --id)")
	exit := flag.Bool("exit", false, "exit once the workflow has ended")
	print := flag.Bool("print", false, "print the first action as served, and exit")
	verbose := flag.Bool("v", false, "the handler's own log on stderr")
	flag.DurationVar(&hold, "hold", 0, "how long each report of an action's end waits for its answer")
	flag.Parse()
	if err := run(*template, *listen, *agentID, *exit, *print, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "tink-server:", err)
		os.Exit(1)
	}
}

// hold is how long a report of an action's end waits for its answer.
var hold time.Duration

// out writes one JSON line at a time on stdout.
var out = struct {
	sync.Mutex
	enc *json.Encoder
}{enc: json.NewEncoder(os.Stdout)}

func emit(v map[string]any) {
	out.Lock()
	defer out.Unlock()
	v["at"] = time.Now().UTC().Format(time.RFC3339Nano)
	_ = out.enc.Encode(v)
}

// workflowTemplate makes a Template's data of an action list: one task,
// on the Hardware's first interface, as Tinkerbell's own examples write
// it.
func workflowTemplate(actions string) string {
	var b strings.Builder
	b.WriteString("version: \"0.1\"\nname: waitdaemon\nglobal_timeout: 1800\ntasks:\n  - name: \"waitdaemon\"\n    worker: \"{{.device_1}}\"\n    actions:\n")
	for _, line := range strings.Split(strings.TrimRight(actions, "\n"), "\n") {
		if line == "" {
			b.WriteString("\n")
			continue
		}
		b.WriteString("      " + line + "\n")
	}
	return b.String()
}

func run(template, listen, agentID string, exit, print, verbose bool) error {
	if template == "" {
		return fmt.Errorf("no -template: name a file that holds a template's action list")
	}
	actions, err := os.ReadFile(template)
	if err != nil {
		return err
	}
	st, err := waitdaemon.Status(workflowName, workflowTemplate(string(actions)), agentID)
	if err != nil {
		return fmt.Errorf("rendering %s as the controller does: %w", template, err)
	}
	st.State = tinkerbell.WorkflowStatePending
	b := &backend{wf: tinkerbell.Workflow{Status: *st}, ended: make(chan struct{})}
	b.wf.Name, b.wf.Namespace = workflowName, workflowNamespace
	emit(map[string]any{"msg": "workflow", "status": st})

	log := logr.Discard()
	if verbose {
		log = funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{Verbosity: 1})
	}
	h := &handler{Handler: &grpcinternal.Handler{Backend: b, Logger: log, NowFunc: time.Now}, b: b}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if print {
		resp, err := h.GetAction(ctx, &proto.ActionRequest{AgentId: &agentID})
		if err != nil {
			return fmt.Errorf("serving the first action: %w", err)
		}
		served(resp)
		return nil
	}

	lis, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	gs := grpc.NewServer()
	proto.RegisterWorkflowServiceServer(gs, h)
	go func() {
		select {
		case <-ctx.Done():
		case <-b.ended:
			if !exit {
				<-ctx.Done()
			}
		}
		// The last report's answer first.
		time.AfterFunc(5*time.Second, gs.Stop)
		gs.GracefulStop()
	}()
	emit(map[string]any{"msg": "serving", "listen": lis.Addr().String(), "agent_id": agentID})
	return gs.Serve(lis)
}

func served(resp *proto.ActionResponse) {
	j, _ := protojson.MarshalOptions{UseProtoNames: true}.Marshal(resp)
	emit(map[string]any{"msg": "action served", "action": json.RawMessage(j)})
}

// handler is the release's own handler, its calls and answers printed.
type handler struct {
	*grpcinternal.Handler
	b *backend
}

func (h *handler) GetAction(ctx context.Context, req *proto.ActionRequest) (*proto.ActionResponse, error) {
	resp, err := h.Handler.GetAction(ctx, req)
	if err == nil {
		served(resp)
	}
	return resp, err
}

func (h *handler) ReportActionStatus(ctx context.Context, req *proto.ActionStatusRequest) (*proto.ActionStatusResponse, error) {
	arrived := time.Now()
	resp, err := h.Handler.ReportActionStatus(ctx, req)
	line := map[string]any{
		"msg": "report", "arrived": arrived.UTC().Format(time.RFC3339Nano),
		"action": req.GetActionName(), "action_id": req.GetActionId(), "state": req.GetActionState().String(),
		"message": req.GetMessage().GetMessage(), "answer": status.Code(err).String(),
	}
	if req.ExecutionStart != nil {
		line["execution_start"] = req.GetExecutionStart().AsTime().Format(time.RFC3339Nano)
	}
	if req.ExecutionStop != nil {
		line["execution_stop"] = req.GetExecutionStop().AsTime().Format(time.RFC3339Nano)
	}
	emit(line)
	if req.GetActionState() != proto.ActionStatusRequest_RUNNING {
		time.Sleep(hold)
	}
	if status.Code(err) == codes.OK {
		h.b.reported()
	}
	return resp, err
}

// backend holds the one Workflow in memory, as the kube backend holds it
// in the cluster, and no Hardware.
type backend struct {
	mu    sync.Mutex
	wf    tinkerbell.Workflow
	once  sync.Once
	ended chan struct{}
}

func (b *backend) ReadWorkflow(_ context.Context, name, namespace string) (*tinkerbell.Workflow, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if name != b.wf.Name || namespace != b.wf.Namespace {
		return nil, status.Errorf(codes.NotFound, "no workflow %s/%s", namespace, name)
	}
	return b.wf.DeepCopy(), nil
}

func (b *backend) ListWorkflows(_ context.Context, f data.WorkflowFilter) ([]tinkerbell.Workflow, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if f.ByAgentID != "" && f.ByAgentID != b.wf.Status.AgentID {
		return nil, nil
	}
	return []tinkerbell.Workflow{*b.wf.DeepCopy()}, nil
}

func (b *backend) UpdateWorkflow(_ context.Context, wf *tinkerbell.Workflow, _ data.UpdateOptions) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.wf = *wf.DeepCopy()
	return nil
}

// reported says so once the workflow has ended: its last action
// succeeded (POST, which the controller turns into SUCCESS), or an
// action failed or timed out.
func (b *backend) reported() {
	b.mu.Lock()
	state := b.wf.Status.State
	b.mu.Unlock()
	switch state {
	case tinkerbell.WorkflowStatePost, tinkerbell.WorkflowStateSuccess, tinkerbell.WorkflowStateFailed, tinkerbell.WorkflowStateTimeout:
		b.once.Do(func() {
			emit(map[string]any{"msg": "workflow ended", "state": string(state)})
			close(b.ended)
		})
	}
}

func (b *backend) ReadHardware(context.Context, string, string) (*tinkerbell.Hardware, error) {
	return nil, status.Error(codes.NotFound, "no hardware")
}

func (b *backend) FilterHardware(context.Context, data.HardwareFilter) (*tinkerbell.Hardware, error) {
	return nil, status.Error(codes.NotFound, "no hardware")
}

func (b *backend) UpdateHardware(context.Context, *tinkerbell.Hardware, data.UpdateOptions) error {
	return nil
}
