// Command kstatus prints the kstatus result (sigs.k8s.io/cli-utils/pkg/kstatus) of
// each Kubernetes object in the JSON list it reads on stdin, one JSON line per object:
// what Flux, Argo CD's kstatus users, kpt and `kubectl wait` tooling would conclude.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

func main() {
	data, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err)
	}
	var objects []json.RawMessage
	if err := json.Unmarshal(data, &objects); err != nil {
		fail(err)
	}
	for _, raw := range objects {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(raw); err != nil {
			fail(err)
		}
		result, err := status.Compute(obj)
		if err != nil {
			fail(err)
		}
		line, _ := json.Marshal(map[string]string{
			"status":  result.Status.String(),
			"message": result.Message,
		})
		fmt.Println(string(line))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "kstatus:", err)
	os.Exit(2)
}
