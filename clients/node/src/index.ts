export * from "./client";
export * from "./error_details";
export * from "./gen/retrieval/v1/retrieval";
export { Metadata, status } from "@grpc/grpc-js";
