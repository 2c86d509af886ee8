// The Next.js config of the examples' Next app: withWorkflow() (workflow/next) and nothing
// else, as the SDK's Next.js guide has it. No serverExternalPackages: a World that needs it
// to be found is a World that does not work for a user who follows the guide.
import { withWorkflow } from "workflow/next";

export default withWorkflow({});
