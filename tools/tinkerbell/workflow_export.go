package workflow

// Render is the controller's own render of a Template for one Hardware's
// data (renderTemplateHardware: Go's text/template with sprig and the
// release's functions, then a non-strict yaml.v3 Unmarshal into Workflow,
// then its validation). scripts/tinkerbell.sh copies this file into the
// release's tink/controller/internal/workflow.
func Render(templateID, templateData string, hardware map[string]interface{}) (*Workflow, error) {
	return renderTemplateHardware(templateID, templateData, hardware)
}
