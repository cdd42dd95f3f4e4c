// dashboardcheck reads a Grafana dashboard's JSON on stdin and checks it against
// Grafana's dashboard schema as the Grafana Foundation SDK's Go types carry it: strict
// decoding (no unknown field, each field of its type, required ones present; panels and
// queries by their plugin's schema) and then the schema's constraints. It prints "ok",
// or each error with its path (panels[1].targets[0].expr: ...) and exits 1.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

func main() {
	plugins.RegisterDefaultPlugins()
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var d dashboard.Dashboard
	failed := false
	for _, err := range []error{d.UnmarshalJSONStrict(raw), d.Validate()} {
		// The SDK returns an empty cog.BuildErrors, not nil, when decoding finds none.
		var found cog.BuildErrors
		if err == nil || (errors.As(err, &found) && len(found) == 0) {
			continue
		}
		fmt.Fprintln(os.Stderr, err)
		failed = true
	}
	if failed {
		os.Exit(1)
	}
	fmt.Println("ok")
}
