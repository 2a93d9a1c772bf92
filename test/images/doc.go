// Package images builds container images without a Docker engine or a registry: an empty base and one layer
// holding a static binary, written as an image archive in `docker save` format, which `ctr images import`,
// `kind load image-archive` and `docker load` all read. It makes the operator image (`make image`) and the
// images the local cluster's real node runs (its pause image, the test trainers). It must not grow a base
// image, a package manager or a shell: each image is one program.
package images
