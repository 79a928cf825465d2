ALTER TABLE "deposits" ADD COLUMN "reference" text;--> statement-breakpoint
ALTER TABLE "deposits" ADD CONSTRAINT "deposits_reference_unique" UNIQUE("reference");