package tinkagent

import (
	"errors"
	"fmt"
	"maps"
	"sort"

	"go.yaml.in/yaml/v3"
)

// templateAction is one item of a template's actions list, with every
// key some release reads: the controller's workflow.Action.
type templateAction struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Timeout int64    `yaml:"timeout"`
	Command []string `yaml:"command"`
	// on-timeout and on-failure: read by every release, then ignored
	// (tink-worker ran them; no release since does).
	OnTimeout   []string          `yaml:"on-timeout"`
	OnFailure   []string          `yaml:"on-failure"`
	Volumes     []string          `yaml:"volumes"`
	Environment map[string]string `yaml:"environment"`
	PID         string            `yaml:"pid"`
	// namespaces: read from v0.25.0 on (readsNamespaces).
	Namespaces struct {
		PID     string `yaml:"pid"`
		Network string `yaml:"network"`
	} `yaml:"namespaces"`
}

// templateTask is one of a template's tasks: its volumes and environment
// go to every action of it.
type templateTask struct {
	Name        string            `yaml:"name"`
	Actions     []templateAction  `yaml:"actions"`
	Volumes     []string          `yaml:"volumes"`
	Environment map[string]string `yaml:"environment"`
}

// ParseTemplateAction is ParseTemplate under HEAD.
func ParseTemplateAction(data []byte, id string) (Action, error) {
	return ParseTemplate(data, Head, id)
}

// ParseTemplate reads the one action of a Tinkerbell template, as r's
// server reads it and sends it to the worker. data is a whole template
// (a mapping with tasks), or one action as the docs write them (a
// mapping, or a list holding one). id is the action's ID.
func ParseTemplate(data []byte, r Release, id string) (Action, error) {
	r = r.orHead()
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Action{}, fmt.Errorf("not YAML: %w", err)
	}
	if len(doc.Content) != 1 {
		return Action{}, errors.New("want one action, or a template of one task of one action")
	}
	node := doc.Content[0]
	var task templateTask
	// Every release reads the template with a plain yaml.Unmarshal (the
	// controller's workflow.parse; tink-worker's server's
	// workflow.Parse): a key it does not know is dropped without a word,
	// and a string field takes a number or a boolean as written.
	switch {
	case node.Kind == yaml.MappingNode && hasKey(node, "tasks"):
		var wf struct {
			Tasks []templateTask `yaml:"tasks"`
		}
		if err := node.Decode(&wf); err != nil {
			return Action{}, fmt.Errorf("want a template of tasks of actions: %w", err)
		}
		if len(wf.Tasks) != 1 {
			return Action{}, fmt.Errorf("a template of %d tasks, want one", len(wf.Tasks))
		}
		task = wf.Tasks[0]
	case node.Kind == yaml.SequenceNode:
		if err := node.Decode(&task.Actions); err != nil {
			return Action{}, fmt.Errorf("want a list of actions: %w", err)
		}
	default:
		task.Actions = make([]templateAction, 1)
		if err := node.Decode(&task.Actions[0]); err != nil {
			return Action{}, fmt.Errorf("want an action: %w", err)
		}
	}
	if len(task.Actions) != 1 {
		return Action{}, fmt.Errorf("a list of %d actions, want one", len(task.Actions))
	}
	t := task.Actions[0]
	if t.Name == "" || t.Image == "" {
		return Action{}, errors.New("an action needs a name and an image")
	}
	if t.Timeout < 0 {
		return Action{}, fmt.Errorf("timeout %d: want seconds, 0 or more", t.Timeout)
	}
	a := Action{
		Release: r, ID: id, Name: t.Name, Image: t.Image, Args: t.Command,
		// The task's volumes, then the action's (every server:
		// append(task.Volumes, action.Volumes...)).
		Volumes: append(append([]string(nil), task.Volumes...), t.Volumes...),
		// The top-level pid, every release.
		PID:     t.PID,
		Timeout: r.deadline(t.Timeout),
	}
	if r.readsNamespaces() {
		// v0.25.0 and HEAD: namespaces.pid over the top-level pid
		// (GetAction: "Prefer namespaces.pid over the deprecated
		// top-level pid field when set"), namespaces.network as given.
		if t.Namespaces.PID != "" {
			a.PID = t.Namespaces.PID
		}
		a.Network = t.Namespaces.Network
	}
	// The task's environment, the action's over it, as K=V strings sorted
	// whole (every server: maps.Copy twice, then sort.Strings).
	env := map[string]string{}
	maps.Copy(env, task.Environment)
	maps.Copy(env, t.Environment)
	for k, v := range env {
		a.Env = append(a.Env, k+"="+v)
	}
	sort.Strings(a.Env)
	return a, nil
}

func hasKey(m *yaml.Node, key string) bool {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return true
		}
	}
	return false
}
