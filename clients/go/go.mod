module github.com/retrieval-platform/retrieval-service/clients/go

go 1.19

require (
	google.golang.org/genproto v0.0.0-20200526211855-cb27e3aa2013
	google.golang.org/grpc v1.33.3
	google.golang.org/protobuf v1.28.1
)
