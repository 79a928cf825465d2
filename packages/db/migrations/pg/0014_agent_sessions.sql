CREATE TABLE "agent_sessions" (
	"node_id" text PRIMARY KEY NOT NULL,
	"replica_id" text NOT NULL,
	"address" text,
	"since" bigint NOT NULL
);
