package tinkagent

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// templateAction is one item of a Tinkerbell template's actions list.
type templateAction struct {
	Name        string    `yaml:"name"`
	Image       string    `yaml:"image"`
	Timeout     int64     `yaml:"timeout"`
	Command     []string  `yaml:"command"`
	Environment yaml.Node `yaml:"environment"`
	Volumes     []string  `yaml:"volumes"`
	PID         string    `yaml:"pid"`
	Namespaces  struct {
		PID     string `yaml:"pid"`
		Network string `yaml:"network"`
	} `yaml:"namespaces"`
}

// ParseTemplateAction reads one action of a Tinkerbell template, as the
// README's templates write them (a mapping, or a list holding one), and
// makes it the action the server sends the agent: the command as its
// args, the environment as KEY=VALUE sorted by key (a number's value as
// written), namespaces.pid else the top-level pid, and the timeout in
// seconds. id is the action's ID.
func ParseTemplateAction(data []byte, id string) (Action, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Action{}, fmt.Errorf("not YAML: %w", err)
	}
	if len(doc.Content) != 1 {
		return Action{}, errors.New("want one action, a mapping of name, image, timeout, command, environment, volumes, pid, namespaces")
	}
	node := doc.Content[0]
	if node.Kind == yaml.SequenceNode {
		if len(node.Content) != 1 {
			return Action{}, fmt.Errorf("a list of %d actions, want one", len(node.Content))
		}
		node = node.Content[0]
	}
	var t templateAction
	out, err := yaml.Marshal(node)
	if err != nil {
		return Action{}, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	dec.KnownFields(true)
	if err := dec.Decode(&t); err != nil {
		return Action{}, fmt.Errorf("want an action of name, image, timeout, command, environment, volumes, pid, namespaces: %w", err)
	}
	if t.Name == "" || t.Image == "" {
		return Action{}, errors.New("an action needs a name and an image")
	}
	if t.Timeout < 0 {
		return Action{}, fmt.Errorf("timeout %d: want seconds, 0 or more", t.Timeout)
	}
	a := Action{
		ID: id, Name: t.Name, Image: t.Image, Args: t.Command, Volumes: t.Volumes,
		PID: cmpOr(t.Namespaces.PID, t.PID), Network: t.Namespaces.Network,
		Timeout: time.Duration(t.Timeout) * time.Second,
	}
	if env := t.Environment; env.Kind != 0 {
		if env.Kind != yaml.MappingNode {
			return Action{}, errors.New("environment: want a mapping of names to values")
		}
		for i := 0; i+1 < len(env.Content); i += 2 {
			k, v := env.Content[i], env.Content[i+1]
			if v.Kind != yaml.ScalarNode {
				return Action{}, fmt.Errorf("environment %s: want a string or a number", k.Value)
			}
			val := v.Value
			if v.Tag == "!!null" {
				val = ""
			}
			a.Env = append(a.Env, k.Value+"="+val)
		}
	}
	slices.SortFunc(a.Env, func(x, y string) int {
		kx, _, _ := strings.Cut(x, "=")
		ky, _, _ := strings.Cut(y, "=")
		return strings.Compare(kx, ky)
	})
	return a, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
