package main

import "testing"

// TestActionName: tink-agent's name for the action's container gives the
// action's name; the containers waitdaemon makes from it, and others,
// give none.
func TestActionName(t *testing.T) {
	for _, tc := range []struct {
		container, want string
		ok              bool
	}{
		{"tinkerbell_reboot_01KFIELD", "reboot", true},
		{"/tinkerbell_stream_image_01KFIELD", "stream_image", true},
		{"tinkerbell_reboot_01KFIELD-waitdaemon-waiter", "", false},
		{"tinkerbell_reboot_01KFIELD-waitdaemon-user", "", false},
		{"tinkerbell_reboot", "", false},
		{"tink-worker", "", false},
		{"", "", false},
	} {
		got, ok := actionName(tc.container)
		if got != tc.want || ok != tc.ok {
			t.Errorf("actionName(%q) = %q, %v; want %q, %v", tc.container, got, ok, tc.want, tc.ok)
		}
	}
}
