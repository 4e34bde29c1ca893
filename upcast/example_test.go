package upcast_test

import (
	"encoding/json"
	"fmt"

	"github.com/cairn-es/cairn/upcast"
)

// Most code adds steps to a codec.Registry; a Chain on its own shows what
// the steps do to the raw form of one stored event.
func ExampleChain() {
	var chain upcast.Chain
	_ = chain.Add(
		upcast.Rename("user.signed_up", 1, "account.opened", 1),
		upcast.TransformJSON("account.opened", 1, func(f map[string]json.RawMessage) error {
			f["plan"] = json.RawMessage(`"free"`) // v2 added a plan; old accounts were free
			return nil
		}),
	)
	current := func(name string) (uint32, bool) {
		if name == "account.opened" {
			return 2, true
		}
		return 0, false
	}
	fmt.Println(chain.Validate(current))

	out, _ := chain.Apply(nil, upcast.Raw{Type: "user.signed_up", Version: 1, Data: []byte(`{"email":"ada@example.com"}`)})
	fmt.Println(out[0].Type, out[0].Version, string(out[0].Data))

	// A step that leads nowhere is caught at set-up.
	_ = chain.Add(upcast.Rename("user.left", 1, "account.closed", 1))
	fmt.Println(chain.Validate(current))
	// Output:
	// <nil>
	// account.opened 2 {"email":"ada@example.com","plan":"free"}
	// upcast chain does not end at a registered type and version: "user.left" v1: step rename "user.left" v1 -> "account.closed" v1 leads to "account.closed" v1, which is not a registered type and version and has no step
}
