"""Hand-written query material per topic of :mod:`tests.data.search_topics`.

* ``keyword``: in the rows' own words;
* ``paraphrase``: in other words: no word (nor its crude stem) of any row on the topic, checked
  by :func:`tests.data.search_queries.check_paraphrases`;
* ``misleading``: on the topic, but naming a word other topics' rows are full of (the decoy);
* ``framed``: the way an agent asks, request framing around the topic (``{rows}`` is the
  table's plural noun);
* ``noun``: how a sentence with conditions names the topic ("inquiries from Globex about ...").
"""

from __future__ import annotations

MATERIAL: dict[str, dict[str, tuple[str, ...]]] = {
    "cancel": {
        "keyword": ("cancel subscription", "terminate the contract", "not renewing the licence"),
        "paraphrase": (
            "stop paying",
            "quit using you altogether",
            "churning to a competitor",
            "leaving us for good",
        ),
        "misleading": (
            "no refund needed, we just want out of the agreement",
            "remove us as paying customers",
        ),
        "framed": (
            "customers who want to stop paying",
            "{rows} from people who want to cancel",
            "requests to terminate a contract",
            "clients asking to quit",
        ),
        "noun": ("cancellations", "cancelling the subscription"),
    },
    "login": {
        "keyword": (
            "can't log in",
            "password reset link expired",
            "account locked after failed sign-in",
        ),
        "paraphrase": (
            "unable to get access",
            "barred from entering",
            "someone could not get into their profile",
            "kicked out before reaching home",
        ),
        "misleading": (
            "invoice portal password not accepted",
            "security code for signing in never shows up",
        ),
        "framed": (
            "{rows} where someone could not sign in",
            "people asking about login problems",
            "customers locked out of their accounts",
            "requests to reset a password",
        ),
        "noun": ("login problems", "sign-in failures"),
    },
    "invoice_error": {
        "keyword": ("wrong amount on invoice", "charged twice", "incorrect VAT on the bill"),
        "paraphrase": (
            "overbilled",
            "they paid more than owed",
            "sum requested looks off",
            "mistaken figures on paperwork we sent them",
        ),
        "misleading": ("the pricing on our bill is incorrect", "duplicate payment on order"),
        "framed": (
            "customers complaining about invoice errors",
            "{rows} about billing mistakes",
            "people asking why they were charged twice",
            "clients who got a wrong bill",
        ),
        "noun": ("invoice errors", "billing mistakes"),
    },
    "refund": {
        "keyword": ("refund request", "money back", "reimburse payment"),
        "paraphrase": (
            "cash owed to them",
            "repay what they spent",
            "compensation owed for an outage",
            "give them their dollars again",
        ),
        "misleading": (
            "cancel the transaction and return the funds",
            "invoice paid by mistake, want it back",
        ),
        "framed": (
            "customers who want their money back",
            "{rows} asking for a refund",
            "requests to reimburse a payment",
            "people asking about refunds",
        ),
        "noun": ("refunds", "getting money back"),
    },
    "pricing": {
        "keyword": ("price list", "quote for licences", "discount annual billing"),
        "paraphrase": (
            "what would it set them back",
            "how expensive is it",
            "affordable options for charities",
            "fees charged yearly",
        ),
        "misleading": ("how much is the onboarding package", "rates for the integration tiers"),
        "framed": (
            "prospects asking how much it costs",
            "{rows} about pricing",
            "requests for a quote",
            "people asking for a discount",
        ),
        "noun": ("pricing", "quotes"),
    },
    "shipping": {
        "keyword": ("order not arrived", "shipment delayed", "package stuck at customs"),
        "paraphrase": (
            "goods never turned up",
            "where is my stuff",
            "boxes lost along the way",
            "waiting ages for the goods",
        ),
        "misleading": ("export stuck at the border", "our hardware order is slow"),
        "framed": (
            "customers whose delivery is late",
            "{rows} about shipping delays",
            "people asking where their order is",
            "complaints about parcels not arriving",
        ),
        "noun": ("shipping delays", "late deliveries"),
    },
    "data_export": {
        "keyword": ("export contacts to CSV", "download backup of data", "bulk export API"),
        "paraphrase": (
            "take our information elsewhere",
            "pull everything out as a spreadsheet",
            "save a copy of everything stored",
            "leave with all their information",
        ),
        "misleading": ("download every invoice record", "move records before cancelling"),
        "framed": (
            "customers who want to export their data",
            "{rows} asking for a backup",
            "requests to download all records",
            "people asking about data export",
        ),
        "noun": ("data exports", "exporting data"),
    },
    "integration": {
        "keyword": ("Salesforce sync failing", "webhook not firing", "API key for connector"),
        "paraphrase": (
            "make it talk to our customer database",
            "linking third-party systems",
            "plugging into other programs",
            "systems not exchanging information",
        ),
        "misleading": ("export to HubSpot", "login for the Zapier connector"),
        "framed": (
            "customers asking about integrations",
            "{rows} where the CRM sync fails",
            "requests to connect Slack",
            "people asking about webhooks",
        ),
        "noun": ("integrations", "CRM sync"),
    },
    "onboarding": {
        "keyword": ("getting started guide", "training session new users", "kickoff call"),
        "paraphrase": (
            "learning the ropes",
            "help newcomers ramp up",
            "how to begin",
            "teach beginners",
        ),
        "misleading": ("demo for the first week of rollout", "import contacts tutorial"),
        "framed": (
            "new customers asking for onboarding",
            "{rows} about getting started",
            "requests for a training session",
            "people asking how to set up the workspace",
        ),
        "noun": ("onboarding", "training"),
    },
    "security": {
        "keyword": ("SOC 2 report", "GDPR agreement", "encrypted at rest"),
        "paraphrase": (
            "is information safe",
            "protecting personal details",
            "auditors asking about safeguards",
            "privacy certifications",
        ),
        "misleading": (
            "password policy for protecting files",
            "contract terms for processing personal data",
        ),
        "framed": (
            "customers asking about security",
            "{rows} about GDPR compliance",
            "requests for the SOC 2 report",
            "people asking where data is hosted",
        ),
        "noun": ("security questions", "compliance"),
    },
    "feature_request": {
        "keyword": ("add dark mode", "feature on the roadmap", "suggestion custom fields"),
        "paraphrase": (
            "wishes for new capabilities",
            "things they wish were built",
            "enhancements they hope for",
            "missing functionality",
        ),
        "misleading": ("scheduling reports would be nice to have", "Slack notifications wish"),
        "framed": (
            "customers asking for new features",
            "{rows} with product suggestions",
            "requests to add a feature",
            "people asking what is on the roadmap",
        ),
        "noun": ("feature requests", "product suggestions"),
    },
    "meeting": {
        "keyword": ("schedule a call", "book a demo", "reschedule meeting"),
        "paraphrase": (
            "set up a chat",
            "arrange a get-together",
            "catch up over video",
            "when can we talk",
        ),
        "misleading": ("time to review the invoice together", "call about pricing next week"),
        "framed": (
            "customers who want to meet",
            "{rows} about scheduling a call",
            "requests to book a demo",
            "people asking to reschedule",
        ),
        "noun": ("meetings", "scheduling calls"),
    },
    "unsubscribe": {
        "keyword": (
            "unsubscribe newsletter",
            "remove from mailing list",
            "opt out marketing emails",
        ),
        "paraphrase": (
            "tired of hearing from us",
            "quit the spam",
            "no further contact, thank you very much",
            "halt outreach",
        ),
        "misleading": ("cancel the newsletter subscription", "stop login reminder emails"),
        "framed": (
            "people who want to unsubscribe",
            "{rows} asking to be removed from the mailing list",
            "requests to opt out of emails",
            "customers asking us to stop emailing",
        ),
        "noun": ("unsubscribing", "opt-outs"),
    },
    "performance": {
        "keyword": ("app very slow", "dashboard takes forever to load", "error 500"),
        "paraphrase": (
            "sluggish",
            "glitchy and unresponsive",
            "hangs constantly",
            "painfully unresponsive screens",
        ),
        "misleading": ("export takes ages", "login page is slow"),
        "framed": (
            "customers complaining that the app is slow",
            "{rows} about crashes",
            "people asking why the dashboard will not load",
            "complaints about performance",
        ),
        "noun": ("performance problems", "slowness"),
    },
}
