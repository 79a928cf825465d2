ALTER TABLE "deployments" ADD COLUMN "endpoint_key" text;--> statement-breakpoint
ALTER TABLE "deployments" ADD CONSTRAINT "deployments_endpoint_key_unique" UNIQUE("endpoint_key");