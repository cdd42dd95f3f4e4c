// Command s3server serves an S3-compatible API on loopback for dbi's tests and local
// stack: gofakes3 (github.com/johannesboyne/gofakes3) over a directory, so objects
// survive a restart of the process. Dev and test tooling only.
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3bolt"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on (port 0: any free one)")
	db := flag.String("db", "s3.db", "bolt database file holding the buckets and objects")
	bucket := flag.String("bucket", "", "a bucket to create at start, if set")
	ready := flag.String("ready-file", "", "file to write the address to once serving")
	flag.Parse()

	backend, err := s3bolt.NewFile(*db)
	if err != nil {
		log.Fatalf("opening %s: %v", *db, err)
	}
	faker := gofakes3.New(backend)
	if *bucket != "" {
		if err := backend.CreateBucket(*bucket); err != nil && !gofakes3.IsAlreadyExists(err) {
			log.Fatalf("creating bucket %s: %v", *bucket, err)
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("listening on %s: %v", *listen, err)
	}
	if *ready != "" {
		// Written whole, then renamed: a reader sees no file or the whole address.
		if err := os.WriteFile(*ready+".tmp", []byte(ln.Addr().String()), 0o600); err != nil {
			log.Fatalf("writing %s: %v", *ready, err)
		}
		if err := os.Rename(*ready+".tmp", *ready); err != nil {
			log.Fatalf("renaming %s: %v", *ready, err)
		}
	}
	log.Printf("s3server serving on %s", ln.Addr())
	log.Fatal(http.Serve(ln, faker.Server()))
}
