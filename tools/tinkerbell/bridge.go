// Package waitdaemon hands the controller's workflow package, internal
// to tink/controller, to the server side's harness (tink/server/waitdaemon).
// scripts/tinkerbell.sh copies this file into the release's
// tink/controller/waitdaemon.
package waitdaemon

import (
	v1alpha1 "github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	"github.com/tinkerbell/tinkerbell/tink/controller/internal/workflow"
)

// Status renders templateData for the agent agentID, as the workflow
// controller does for a Workflow whose Hardware's first interface is
// agentID ({{.device_1}}), and returns the status it stores: the tasks and
// actions the gRPC server serves.
func Status(templateID, templateData, agentID string) (*v1alpha1.WorkflowStatus, error) {
	wf, err := workflow.Render(templateID, templateData, map[string]interface{}{"device_1": agentID})
	if err != nil {
		return nil, err
	}
	return workflow.YAMLToStatus(wf), nil
}
